// commands_model.cpp — `workbook model`: Chapter 10's cost model held against
// the emulated cluster. For each nodes × link it brings a cluster up of its
// own (OwnCluster, Note: [a command's own emulated cluster]) and runs the
// reference ch10_model on it, one rank per node:
//
//   --measure link        ping-pongs, and the link's α and β fitted to them
//   --measure allreduce   per algorithm, each size's all-reduce time predicted
//                         from the fitted α and β, and measured
//   --measure steps       (2 nodes only) a training step per layout, predicted and measured
//   --measure pipeline    (2 nodes only) a pipeline of equal stages, GPipe and 1F1B with
//                         m micro-batches: its step and the share of it each stage waits
//   --measure tensor      (2 nodes only) the same blocks tensor-parallel over both nodes
//
// Each run writes JSON lines into a file of its own beside the output; their
// "model" lines are appended to build/<preset>/model/model.jsonl (after one
// "model_header" line) with the configuration ("nodes", "link",
// "link_bits_per_s") and "ratio" = predicted / measured; a run that failed
// leaves a "model" line of kind "error". Printed: a table per configuration
// and a summary of the worst |ratio - 1|; `workbook report` draws the file
// (model_allreduce_*.png, model_steps.png, model_bubble.png).
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <thread>

#include "cli.hpp"
#include "commands.hpp"
#include "predictions.hpp"
#include "table.hpp"
#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

const char* const model_program = "ch10_model";
const char* const model_algorithms[] = {"ring", "recursive_doubling", "rabenseifner", "workbook_ring"};
constexpr double bandwidth_bound_bytes = 1024.0 * 1024.0;  // the summary's "large" sizes

// One configuration and what its runs wrote.
struct ModelRuns {
  int nodes = 0;
  std::string link;   // as cluster.sh takes it: "1gbit"
  std::vector<nlohmann::json> lines;  // as appended to the output, "error" lines included
  int failures = 0;
};

double number_or_nan(const nlohmann::json& line, const char* key) {
  return line.contains(key) && line[key].is_number() ? line[key].get<double>() : std::nan("");
}

std::string last_lines(const std::string& text, int count) {
  size_t at = text.find_last_not_of('\n');
  if (at == std::string::npos) return "";
  const size_t end = at + 1;
  for (int seen = 0; at > 0; --at)
    if (text[at - 1] == '\n' && ++seen == count) break;
  return text.substr(at, end - at);
}

// The configuration, as every line written carries it.
nlohmann::json model_where(const ModelRuns& runs) {
  return {{"nodes", runs.nodes}, {"link", runs.link},
          {"link_bits_per_s", EmulatedCluster{runs.nodes, runs.link}.link_bits_per_s()}};
}

void append_line(ModelRuns& runs, nlohmann::json line, std::ofstream& out) {
  line.update(model_where(runs));
  out << line.dump() << "\n";
  out.flush();
  runs.lines.push_back(std::move(line));
}

void record_failure(ModelRuns& runs, const std::string& what, const std::string& error, std::ofstream& out) {
  append_line(runs, {{"type", "model"}, {"kind", "error"}, {"what", what}, {"error", error}}, out);
  ++runs.failures;
}

// One run of ch10_model (`what` names it in the table) on the configuration's
// nodes: its "model" lines, with the configuration and the ratio, go to `out`
// and to runs.lines. A failed run prints its output's tail, leaves an "error"
// line, and returns false.
bool run_model(ModelRuns& runs, const std::string& what, const std::vector<std::string>& args, const fs::path& dir,
               std::ofstream& out) {
  std::vector<std::string> argv = {(build_dir() / "bin/solution" / model_program).string()};
  argv.insert(argv.end(), args.begin(), args.end());
  fmt::print("  {} {} ...\n", model_program, fmt::join(args, " "));
  std::fflush(stdout);
  const RunOutcome outcome = run_for_result(argv, /*passthrough=*/false, 3600,
                                            Placement::on_nodes(runs.nodes, runs.nodes),
                                            dir / fmt::format(".model-run-{}.jsonl", getpid()));
  if (outcome.status != ExitStatus::Ok) {
    fmt::print("    failed after {:.0f} s: {}\n    its output ended:\n{}\n", outcome.wall_s, outcome.error,
               last_lines(outcome.output, 20));
    record_failure(runs, what, outcome.error, out);
    return false;
  }
  for (nlohmann::json line : outcome.lines) {
    if (line.value("type", "") != "model") continue;
    const double predicted = number_or_nan(line, "predicted"), measured = number_or_nan(line, "measured");
    if (std::isfinite(predicted) && measured > 0) line["ratio"] = predicted / measured;
    // An all-reduce is also predicted with the CPU's share (γ and an exchange's β).
    const double with_cpu = number_or_nan(line, "predicted_with_cpu");
    if (std::isfinite(with_cpu) && measured > 0) line["ratio_with_cpu"] = with_cpu / measured;
    append_line(runs, std::move(line), out);
  }
  fmt::print("    done in {:.0f} s\n", outcome.wall_s);
  return true;
}

// Every measurement of one configuration: the link, then each all-reduce
// with the fitted α and β, then (2 nodes) the steps, the pipeline and tensor parallel.
void measure(ModelRuns& runs, bool quick, bool steps, const fs::path& dir, std::ofstream& out) {
  std::vector<std::string> more;
  if (quick) more.push_back("--quick");
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  if (!run_model(runs, "link fit", with({"--measure", "link"}), dir, out)) return;
  const auto fit = std::find_if(runs.lines.begin(), runs.lines.end(),
                                [](const nlohmann::json& l) { return l.value("kind", "") == "link"; });
  if (fit == runs.lines.end() || !std::isfinite(number_or_nan(*fit, "alpha")) ||
      !std::isfinite(number_or_nan(*fit, "beta"))) {
    const std::string error = "--measure link wrote no \"link\" line with alpha and beta: nothing to predict from";
    fmt::print("    {}\n", error);
    record_failure(runs, "link fit", error, out);
    return;
  }
  // Note: [a flat ping-pong] Where ranks share cores, the ping-pong's times
  // can be the scheduler's tick at every size, and the line through them
  // slope down: no time per byte is what they show, so β = 0.
  double beta = number_or_nan(*fit, "beta");
  if (beta < 0) {
    fmt::print("    the fitted beta is below 0 ({:.3g} ns per byte: the ping-pong's times did not grow with size); "
               "predicted with beta = 0\n", beta * 1e9);
    beta = 0;
  }
  more.insert(more.end(), {"--alpha", fmt::format("{:.17g}", number_or_nan(*fit, "alpha")), "--beta",
                           fmt::format("{:.17g}", beta)});
  for (const char* algorithm : model_algorithms)
    run_model(runs, fmt::format("allreduce {}", algorithm), with({"--measure", "allreduce", "--algorithm", algorithm}),
              dir, out);
  if (!steps) return;
  for (const char* layouts : {"steps", "pipeline", "tensor"})
    run_model(runs, layouts, with({"--measure", layouts}), dir, out);
}

// What a line measured, as the tables name it: "pingpong", "allreduce ring", "step zero3".
std::string model_what(const nlohmann::json& line) {
  const std::string kind = line.value("kind", "?");
  if (kind == "allreduce") return "allreduce " + line.value("algorithm", "?");
  if (kind == "step") return "step " + line.value("layout", "?");
  if (kind == "error") return line.value("what", "?");
  return kind;
}

std::string model_size(const nlohmann::json& line) {
  return line.contains("size") && line["size"].is_number() ? format_bytes(line["size"].get<double>()) : "-";
}

std::string milliseconds(const nlohmann::json& line, const char* key) {
  const double seconds = number_or_nan(line, key);
  return std::isfinite(seconds) ? fmt::format("{:.3f}", 1e3 * seconds) : "-";
}

void print_model_table(const ModelRuns& runs) {
  fmt::print("\n{} nodes at {}: predicted from the fitted link, measured on the emulated cluster\n\n", runs.nodes,
             runs.link);
  const std::vector<Column> columns = {{{"", "what"}, 28, true},     {{"", "size"}, 9},
                                       {{"predicted", "ms"}, 11},    {{"measured", "ms"}, 11},
                                       {{"predicted", "/ measured"}, 11},
                                       {{"with CPU", "/ measured"}, 11}};
  print_heading(columns);
  auto ratio_text = [](const nlohmann::json& line, const char* key) {
    const double ratio = number_or_nan(line, key);
    return std::isfinite(ratio) ? fmt::format("{:.2f}", ratio) : std::string("-");
  };
  for (const nlohmann::json& line : runs.lines) {
    const std::string kind = line.value("kind", "");
    if (kind == "link") continue;
    if (kind == "error") {
      print_row(columns, {model_what(line)}, "  failed: " + line.value("error", "?"));
      continue;
    }
    print_row(columns, {model_what(line), model_size(line), milliseconds(line, "predicted"),
                        milliseconds(line, "measured"), ratio_text(line, "ratio"), ratio_text(line, "ratio_with_cpu")});
  }
  for (const nlohmann::json& line : runs.lines)
    if (line.value("kind", "") == "link")
      fmt::print("\nthe fitted link: alpha = {:.1f} us per message, beta = {:.4g} ns per byte ({:.3g} Gbit/s; {} asked)\n",
                 1e6 * number_or_nan(line, "alpha"), 1e9 * number_or_nan(line, "beta"),
                 number_or_nan(line, "bits_per_s") / 1e9, runs.link);
}

// The worst |ratio - 1| (the line's `key`) of the lines `keep` accepts, and where; "-" when none.
std::pair<std::string, std::string> worst(const std::vector<ModelRuns>& done, const std::string& link,
                                          bool (*keep)(const nlohmann::json&, int nodes), const char* key = "ratio") {
  double off = -1;
  std::string where;
  for (const ModelRuns& runs : done) {
    if (runs.link != link) continue;
    for (const nlohmann::json& line : runs.lines) {
      const double ratio = number_or_nan(line, key);
      if (!std::isfinite(ratio) || !keep(line, runs.nodes) || std::abs(ratio - 1) <= off) continue;
      off = std::abs(ratio - 1);
      where = fmt::format("{}{}, {} nodes", model_what(line),
                          line.contains("size") ? ", " + model_size(line) : std::string(), runs.nodes);
    }
  }
  if (off < 0) return {"-", ""};
  return {fmt::format("{:.0f}%", 100 * off), where};
}

void print_model_summary(const std::vector<ModelRuns>& done, const std::vector<std::string>& links) {
  fmt::print("\nHow far the predictions were off: the worst |predicted / measured - 1| per link\n\n");
  const std::vector<Column> columns = {{{"", "link"}, 8, true},
                                       {{"", "worst"}, 6, false, " | ", "bandwidth-bound (>= 1 MiB)"},
                                       {{"", "where"}, 36, true, " ", "bandwidth-bound (>= 1 MiB)"},
                                       {{"", "worst"}, 6, false, " | ", "all-reduce with CPU"},
                                       {{"", "where"}, 36, true, " ", "all-reduce with CPU"},
                                       {{"", "worst"}, 6, false, " | ", "steps (2 nodes)"},
                                       {{"", "where"}, 20, true, " ", "steps (2 nodes)"}};
  print_heading(columns);
  for (const std::string& link : links) {
    const auto [large, large_at] = worst(done, link, [](const nlohmann::json& line, int) {
      const std::string kind = line.value("kind", "");
      return (kind == "pingpong" || kind == "allreduce") && line.value("size", 0.0) >= bandwidth_bound_bytes;
    });
    const auto [with_cpu, with_cpu_at] = worst(
        done, link,
        [](const nlohmann::json& line, int) {
          return line.value("kind", "") == "allreduce" && line.value("size", 0.0) >= bandwidth_bound_bytes;
        },
        "ratio_with_cpu");
    const auto [step, step_at] = worst(done, link, [](const nlohmann::json& line, int nodes) {
      return line.value("kind", "") == "step" && nodes == 2;
    });
    print_row(columns, {link, large, large_at, with_cpu, with_cpu_at, step, step_at});
  }
}

}  // namespace

int cmd_model(std::vector<int> nodes, std::vector<std::string> links, bool quick,
              const std::optional<std::string>& json_file, bool no_steps) {
  if (nodes.empty()) nodes = quick ? std::vector<int>{2} : std::vector<int>{2, 4};
  if (links.empty()) links = quick ? std::vector<std::string>{"1gbit"} : std::vector<std::string>{"100mbit", "1gbit", "10gbit"};
  // Note: [a command's own emulated cluster] the user's is theirs: neither
  // used (its link is not the one asked) nor taken down.
  check_own_cluster_can_start("model", links);
  // The student's predictions, read before anything runs (a malformed line stops here).
  const auto chapters = load_chapters();
  const Chapter& chapter = find_chapter(chapters, "ch10");
  const std::map<std::string, double> predicted = read_predictions(chapter.predictions_file(), chapter.predictions, chapter.id);
  if (!build_targets({std::string(model_program) + "_solution"}, /*quiet=*/false)) return 1;

  const fs::path json_path = fs::absolute(json_file ? fs::path(*json_file) : build_dir() / "model" / "model.jsonl");
  const fs::path dir = json_path.parent_path();
  fs::create_directories(dir);
  std::ofstream out(json_path);
  WB_CHECK(out.is_open(), "{}: cannot open for writing", json_path.string());
  const unsigned cores = std::thread::hardware_concurrency();
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  out << nlohmann::json({{"type", "model_header"}, {"date", date}, {"cores", cores}, {"torch", config::torch_version},
                         {"quick", quick}, {"nodes", nodes}, {"links", links}})
             .dump()
      << "\n";

  std::vector<ModelRuns> done;
  std::optional<std::string> cannot;  // why the cluster did not come up
  OwnCluster cluster("`workbook model`");
  for (const int n : nodes) {
    for (const std::string& link : links) {
      cluster.down();  // the previous configuration's
      fmt::print("\n== {} nodes at {} ==\n", n, link);
      if ((cannot = cluster.up(n, link))) break;
      ModelRuns runs;
      runs.nodes = n;
      runs.link = link;
      measure(runs, quick, n == 2 && !no_steps, dir, out);
      print_model_table(runs);
      done.push_back(std::move(runs));
    }
    if (cannot) break;
  }
  cluster.down();
  int failures = 0;
  for (const ModelRuns& runs : done) failures += runs.failures;
  if (!done.empty()) {
    print_model_summary(done, links);
    std::vector<nlohmann::json> lines;
    for (const ModelRuns& runs : done) lines.insert(lines.end(), runs.lines.begin(), runs.lines.end());
    print_predictions(chapter.predictions, predicted, lines, relative_to_source(chapter.predictions_file().string()));
    if (failures > 0) fmt::print("\n{} run(s) failed: their \"error\" lines are in the results\n", failures);
    fmt::print("\nresults: {}\nplots:   workbook report {} --out {}\n", json_path.string(), json_path.string(),
               (build_dir() / "report").string());
  }
  if (cannot) {
    fmt::print(stderr, "\nworkbook model: the emulated cluster did not come up:\n{}\n", *cannot);
    return 1;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace workbook::cli
