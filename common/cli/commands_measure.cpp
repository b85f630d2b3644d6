// commands_measure.cpp — bench and info: numbers measured in one run.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <thread>

#include "cli.hpp"
#include "commands.hpp"
#include "workbook/config.hpp"
#include "workbook/data_location.hpp"
#include "workbook/errors.hpp"
#include "workbook/gpu_info.hpp"
#include "workbook/statistics.hpp"

namespace workbook::cli {
namespace {

// Replaces {chapter_dir}, {source_dir} in a manifest's command line.
std::string expand(std::string text, const Chapter& chapter) {
  const std::pair<std::string, std::string> names[] = {
      {"{chapter_dir}", (source_dir() / "chapters" / chapter.folder).string()},
      {"{source_dir}", source_dir().string()}};
  for (const auto& [key, value] : names)
    for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  return text;
}

std::string format_metric(double value) {
  if (value == 0.0) return "0";
  const double magnitude = std::abs(value);
  return magnitude >= 100 ? fmt::format("{:.1f}", value) : magnitude >= 1 ? fmt::format("{:.3f}", value)
                                                                           : fmt::format("{:.4f}", value);
}

// A "rows" benchmark: the program measures many points itself and writes one
// JSON line per point and implementation: {"type": "row", <keys>, "impl",
// <metric>, <extra metrics>}, where impl "self" is the code the binary was
// built from. Rows from the student's build become "student", from the
// reference build "reference"; other impls (baselines inside the program)
// are pooled from both. Printed: one line per point, a column per impl.
struct Impl {
  std::string name;
  std::vector<std::string> argv;
  std::vector<RunOutcome> runs;
  // The error of the latest run that failed ("" when none did).
  std::string error() const {
    for (auto run = runs.rbegin(); run != runs.rend(); ++run)
      if (!run->ok) return run->error;
    return "";
  }
};

// Runs every implementation `repeats` times. Note: runs are interleaved
// (A B C A B C ...) so that a slow spell of a busy machine hits every
// implementation alike; the tables report medians, which resist outliers.
void run_interleaved(std::vector<Impl>& impls, int repeats, int ranks, std::optional<std::ofstream>& json) {
  for (int r = 0; r < repeats; ++r) {
    for (Impl& impl : impls) {
      // An exercise not written yet will not be written by the next repeat.
      if (!impl.runs.empty() && impl.runs.back().error.rfind("not done yet", 0) == 0) continue;
      fmt::print("  run {}/{}: {} ...\n", r + 1, repeats, impl.name);
      std::fflush(stdout);
      impl.runs.push_back(run_for_result(impl.argv, false, 3600, ranks));
      const RunOutcome& o = impl.runs.back();
      if (json) {
        nlohmann::json line = {{"type", "bench_run"}, {"impl", impl.name}, {"repeat", r}, {"ok", o.ok}};
        if (o.ok) line["result"] = o.result;
        else line["error"] = o.error;
        *json << line.dump() << "\n";
      }
      if (!o.ok) fmt::print("    {}\n", o.error);
    }
  }
}

// The medians of an implementation's successful runs (runs == 0: none succeeded).
struct RunMedians {
  size_t runs = 0;
  double samples_per_s = 0, epoch_s = 0, test_accuracy = 0, peak_mem_bytes = 0;
};
RunMedians medians_of(const Impl& impl) {
  std::vector<double> rate, epoch, accuracy, memory;
  for (const RunOutcome& o : impl.runs) {
    if (!o.ok) continue;
    rate.push_back(o.result.value("samples_per_s", 0.0));
    epoch.push_back(o.result.value("epoch_s", 0.0));
    accuracy.push_back(o.result.value("test_accuracy", 0.0));
    memory.push_back(o.result.value("peak_mem_bytes", 0.0));
  }
  return {rate.size(), median(rate), median(epoch), median(accuracy), median(memory)};
}

// Below a part's table: why the student's column is empty (if it is), and the part's note.
void print_footer(const nlohmann::json& part, const std::vector<Impl>& impls) {
  const std::string student_error = impls[0].error();
  if (!student_error.empty()) fmt::print("\nstudent: {}\n", student_error.substr(0, student_error.find(": replace")));
  const std::string note = part.value("note", "");
  if (!note.empty()) fmt::print("\n{}\n", note);
}

int bench_rows(const Chapter& chapter, const nlohmann::json& part, const std::vector<Impl>& impls,
               std::optional<std::ofstream>& json) {
  const auto keys = part.value("keys", std::vector<std::string>{});
  const std::string metric = part.value("metric", "ms");
  const auto extras = part.value("extra_metrics", std::vector<std::string>{});
  std::vector<std::string> metrics = {metric};
  metrics.insert(metrics.end(), extras.begin(), extras.end());
  struct Point {
    std::vector<std::string> key;  // the key columns, printed
    std::map<std::string, std::map<std::string, std::vector<double>>> values;  // impl -> metric -> samples
  };
  std::vector<Point> points;
  std::vector<std::string> impl_order = {"student", "reference"};
  auto add_rows = [&](const RunOutcome& outcome, const std::string& self_name) {
    for (const nlohmann::json& line : outcome.lines) {
      if (line.value("type", "") != "row") continue;
      std::vector<std::string> key;
      for (const auto& k : keys) key.push_back(line.contains(k) ? (line[k].is_string() ? line[k].get<std::string>() : line[k].dump()) : "-");
      auto it = std::find_if(points.begin(), points.end(), [&](const Point& p) { return p.key == key; });
      if (it == points.end()) it = points.insert(points.end(), Point{key, {}});
      std::string impl = line.value("impl", "self");
      if (impl == "self") impl = self_name;
      if (std::find(impl_order.begin(), impl_order.end(), impl) == impl_order.end()) impl_order.push_back(impl);
      for (const std::string& m : metrics)
        if (line.contains(m) && line[m].is_number()) it->values[impl][m].push_back(line[m].get<double>());
    }
  };
  bool reference_ok = false;
  for (const Impl& impl : impls)
    for (const RunOutcome& outcome : impl.runs)
      if (outcome.ok) {
        add_rows(outcome, impl.name);
        reference_ok = reference_ok || impl.name == "reference";
      }

  // One column per impl for the metric, then the student's speed relative to
  // the reference, then each extra metric for the student and the reference.
  const int width = 13;
  std::vector<size_t> key_width(keys.size(), 9);  // wide enough for every cell
  for (size_t k = 0; k < keys.size(); ++k) {
    key_width[k] = std::max(key_width[k], keys[k].size() + 1);
    for (const Point& p : points) key_width[k] = std::max(key_width[k], p.key[k].size() + 1);
  }
  std::string header;
  for (size_t k = 0; k < keys.size(); ++k) header += fmt::format("{:>{}}", keys[k], key_width[k]);
  for (const auto& impl : impl_order) header += fmt::format(" {:>{}}", impl.substr(0, width - 3) + " " + metric, width);
  header += fmt::format(" {:>9}", "speed");
  for (const auto& extra : extras)
    for (const char* impl : {"student", "reference"})
      header += fmt::format(" {:>{}}", fmt::format("{} {}", impl == std::string("student") ? "stu" : "ref", extra), width + 4);
  fmt::print("\n{}\n", header);
  auto median_of = [&](const Point& p, const std::string& impl, const std::string& m) -> std::optional<double> {
    auto i = p.values.find(impl);
    if (i == p.values.end()) return std::nullopt;
    auto j = i->second.find(m);
    if (j == i->second.end() || j->second.empty()) return std::nullopt;
    return median(j->second);
  };
  for (const Point& p : points) {
    std::string line;
    for (size_t k = 0; k < p.key.size(); ++k) line += fmt::format("{:>{}}", p.key[k], key_width[k]);
    for (const auto& impl : impl_order) {
      auto v = median_of(p, impl, metric);
      line += fmt::format(" {:>{}}", v ? format_metric(*v) : "-", width);
    }
    auto student = median_of(p, "student", metric), reference = median_of(p, "reference", metric);
    const bool lower_is_better = part.value("lower_is_better", true);
    if (student && reference && *student > 0 && *reference > 0)
      line += fmt::format(" {:>8.2f}x", lower_is_better ? *reference / *student : *student / *reference);
    else
      line += fmt::format(" {:>9}", "-");
    for (const auto& extra : extras)
      for (const char* impl : {"student", "reference"}) {
        auto v = median_of(p, impl, extra);
        line += fmt::format(" {:>{}}", v ? format_metric(*v) : "-", width + 4);
      }
    fmt::print("{}\n", line);
    if (json)
      for (const auto& impl : impl_order) {
        nlohmann::json row = {{"type", "bench_row"}, {"chapter", chapter.id}, {"impl", impl}};
        for (size_t k = 0; k < keys.size(); ++k) row[keys[k]] = p.key[k];
        bool any = false;
        for (const std::string& m : metrics)
          if (auto v = median_of(p, impl, m)) {
            row[m] = *v;
            any = true;
          }
        if (any) *json << row.dump() << "\n";
      }
  }
  print_footer(part, impls);
  return reference_ok ? 0 : 1;
}

// A "bandwidth" part (nccl-tests' table): the program writes one row per
// buffer size and implementation, {"type": "row", "size", "count", "impl",
// "time_us", "algbw", "busbw", "wrong"}, where impl "self" is the build's own
// collective and the others the library's ("mpi", "nccl") and "memcpy".
// Printed: a line per size with a group of columns per implementation (the
// student's, the reference's, the library's), then the reference's busbw
// over the library's measured in the same run ("vs_library"), and memcpy.
int bench_bandwidth(const Chapter& chapter, const nlohmann::json& part, const std::vector<Impl>& impls,
                    std::optional<std::ofstream>& json) {
  struct Cell {
    std::vector<double> time_us, algbw, busbw, vs_library;
    int64_t wrong = 0;
    int ranks = 0;
  };
  std::map<int64_t, std::map<std::string, Cell>> by_size;  // size -> impl -> samples
  std::vector<std::string> columns = {"student-ring", "reference-ring"};
  for (const Impl& impl : impls)
    for (const RunOutcome& outcome : impl.runs) {
      if (!outcome.ok) continue;
      for (const nlohmann::json& line : outcome.lines) {
        if (line.value("type", "") != "row") continue;
        std::string name = line.value("impl", "self");
        if (name == "self") name = impl.name + "-ring";
        else if (impl.name != "reference") continue;  // the library's numbers: from the reference's runs
        if (name != "memcpy" && std::find(columns.begin(), columns.end(), name) == columns.end())
          columns.push_back(name);
        Cell& cell = by_size[line.value("size", int64_t{0})][name];
        cell.time_us.push_back(line.value("time_us", 0.0));
        cell.algbw.push_back(line.value("algbw", 0.0));
        cell.busbw.push_back(line.value("busbw", 0.0));
        if (line.contains("vs_library")) cell.vs_library.push_back(line.value("vs_library", 0.0));
        cell.wrong = std::max(cell.wrong, line.value("wrong", int64_t{0}));
        cell.ranks = line.value("ranks", 0);
      }
    }
  std::string top = fmt::format("{:>10} {:>10} {:>5}", "", "", "");
  std::string names = fmt::format("{:>10} {:>10} {:>5}", "size", "count", "type");
  std::string units = fmt::format("{:>10} {:>10} {:>5}", "(B)", "(elements)", "");
  for (const std::string& c : columns) {
    top += fmt::format(" | {:^30}", c);
    names += fmt::format(" | {:>9} {:>6} {:>6} {:>6}", "time", "algbw", "busbw", "#wrong");
    units += fmt::format(" | {:>9} {:>6} {:>6} {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  }
  top += fmt::format(" | {:>7} | {:>7}", "ref/lib", "memcpy");
  names += fmt::format(" | {:>7} | {:>7}", "busbw", "");
  units += fmt::format(" | {:>7} | {:>7}", "", "(GB/s)");
  fmt::print("\n{}\n{}\n{}\n", top, names, units);
  std::map<std::string, std::vector<double>> busbw_of;
  for (const auto& [size, cells] : by_size) {
    std::string line = fmt::format("{:>10} {:>10} {:>5}", size, size / 4, "float");
    for (const std::string& c : columns) {
      auto it = cells.find(c);
      if (it == cells.end()) {
        line += fmt::format(" | {:>9} {:>6} {:>6} {:>6}", "-", "-", "-", "-");
        continue;
      }
      const Cell& cell = it->second;
      line += fmt::format(" | {:>9.1f} {:>6.2f} {:>6.2f} {:>6}", median(cell.time_us), median(cell.algbw),
                          median(cell.busbw), cell.wrong);
      busbw_of[c].push_back(median(cell.busbw));
    }
    auto ref = cells.find("reference-ring");
    auto copy = cells.find("memcpy");
    const double vs = ref != cells.end() ? median(ref->second.vs_library) : 0.0;
    line += vs > 0 ? fmt::format(" | {:>6.2f}x", vs) : fmt::format(" | {:>7}", "-");
    line += copy != cells.end() ? fmt::format(" | {:>7.2f}", median(copy->second.algbw)) : fmt::format(" | {:>7}", "-");
    fmt::print("{}\n", line);
    if (json)
      for (const auto& [name, cell] : cells) {
        nlohmann::json row = {{"type", "bench_bandwidth"}, {"chapter", chapter.id}, {"impl", name},
                              {"ranks", cell.ranks}, {"size", size},
                              {"time_us", median(cell.time_us)}, {"algbw", median(cell.algbw)},
                              {"busbw", median(cell.busbw)}, {"wrong", cell.wrong}};
        if (!cell.vs_library.empty()) row["vs_library"] = median(cell.vs_library);
        *json << row.dump() << "\n";
      }
  }
  std::string average = "# Avg bus bandwidth:";
  for (const std::string& c : columns)
    if (!busbw_of[c].empty()) average += fmt::format(" {} {:.3f} GB/s;", c, mean(busbw_of[c]));
  fmt::print("\n{}\n", average);
  print_footer(part, impls);
  return by_size.empty() ? 1 : 0;
}

// The student's build, the reference build and the part's baselines, each
// with `args` after its command.
std::vector<Impl> bench_impls(const Chapter& chapter, const nlohmann::json& part, const std::string& program,
                              const std::vector<std::string>& args) {
  std::vector<Impl> impls = {{"student", {(build_dir() / "bin/student" / program).string()}, {}},
                             {"reference", {(build_dir() / "bin/solution" / program).string()}, {}}};
  for (const auto& baseline : part.value("baselines", nlohmann::json::array())) {
    Impl impl{baseline.at("name").get<std::string>(), {}, {}};
    for (const auto& word : baseline.at("command")) impl.argv.push_back(expand(word.get<std::string>(), chapter));
    impls.push_back(impl);
  }
  for (Impl& impl : impls) impl.argv.insert(impl.argv.end(), args.begin(), args.end());
  return impls;
}

// A "scaling" part: every implementation at every configuration (ranks x
// threads per rank), interleaved, then each multi-rank configuration's
// scaling efficiency against the single-rank one: rate_N / (N x rate_1).
int bench_scaling(const Chapter& chapter, const nlohmann::json& part, int repeats,
                  const std::vector<std::string>& extra_args, std::optional<std::ofstream>& json) {
  const std::string program = part.value("program", chapter.program);
  struct Config {
    std::string name;
    int ranks, threads;
    std::vector<Impl> impls;
  };
  std::vector<Config> configs;
  for (const auto& c : part.at("configs")) {
    Config config{c.at("name").get<std::string>(), c.at("ranks").get<int>(), c.value("threads", 1), {}};
    std::vector<std::string> args = part.value("args", std::vector<std::string>{});
    args.insert(args.end(), {"--threads", std::to_string(config.threads)});
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    config.impls = bench_impls(chapter, part, program, args);
    configs.push_back(std::move(config));
  }
  fmt::print("{} bench, {}\n  {} {}; {} run(s) of each, interleaved; medians\n", chapter.id,
             part.value("title", "scaling"), program, fmt::join(part.value("args", std::vector<std::string>{}), " "),
             repeats);
  for (int r = 0; r < repeats; ++r)
    for (Config& config : configs) {
      std::vector<Impl*> pending;
      for (Impl& impl : config.impls) {
        if (!impl.runs.empty() && impl.runs.back().error.rfind("not done yet", 0) == 0) continue;
        fmt::print("  run {}/{}: {} at {} ({} rank(s) x {} thread(s)) ...\n", r + 1, repeats, impl.name, config.name,
                   config.ranks, config.threads);
        std::fflush(stdout);
        impl.runs.push_back(run_for_result(impl.argv, false, 3600, config.ranks));
        if (!impl.runs.back().ok) fmt::print("    {}\n", impl.runs.back().error);
      }
    }

  auto median_rate = [](const Impl& impl) { return medians_of(impl).samples_per_s; };
  fmt::print("\n{:<14} {:>6} {:>11} {:>9} {:>9} {:>12} {:>13}\n", "impl", "config", "samples/s", "epoch_s", "test_acc",
             "peak_mem", "vs_reference");
  bool reference_ok = false;
  for (const Config& config : configs) {
    const double reference_rate = median_rate(config.impls[1]);
    reference_ok = reference_ok || reference_rate > 0;
    for (const Impl& impl : config.impls) {
      const RunMedians m = medians_of(impl);
      if (m.runs == 0) {
        const std::string error = impl.error();
        fmt::print("{:<14} {:>6} {}\n", impl.name, config.name, error.substr(0, error.find(": replace")));
        continue;
      }
      const double ratio = reference_rate > 0 ? m.samples_per_s / reference_rate : 0.0;
      fmt::print("{:<14} {:>6} {:>11.1f} {:>9.2f} {:>9.4f} {:>12} {:>12.2f}x\n", impl.name, config.name,
                 m.samples_per_s, m.epoch_s, m.test_accuracy, format_mib(m.peak_mem_bytes), ratio);
      if (json)
        *json << nlohmann::json({{"type", "bench"}, {"chapter", chapter.id}, {"impl", impl.name},
                                 {"config", config.name}, {"ranks", config.ranks}, {"threads", config.threads},
                                 {"runs", m.runs}, {"samples_per_s", m.samples_per_s}, {"epoch_s", m.epoch_s},
                                 {"test_accuracy", m.test_accuracy}, {"peak_mem_bytes", m.peak_mem_bytes},
                                 {"vs_reference", ratio}})
                     .dump()
              << "\n";
    }
  }
  // Scaling efficiency of each multi-rank configuration against the single-rank one.
  const auto single = std::find_if(configs.begin(), configs.end(), [](const Config& c) { return c.ranks == 1; });
  if (single != configs.end()) {
    fmt::print("\n{:<14} {:>6} {:>11}\n", "impl", "config", "efficiency");
    for (const Config& config : configs) {
      if (config.ranks == 1) continue;
      for (size_t i = 0; i < config.impls.size(); ++i) {
        const double one = median_rate(single->impls[i]), many = median_rate(config.impls[i]);
        if (one <= 0 || many <= 0) continue;
        const double efficiency = many / (config.ranks * one);
        fmt::print("{:<14} {:>6} {:>11.3f}   = {:.1f} / ({} x {:.1f})\n", config.impls[i].name, config.name, efficiency,
                   many, config.ranks, one);
        if (json)
          *json << nlohmann::json({{"type", "bench_scaling"}, {"chapter", chapter.id}, {"impl", config.impls[i].name},
                                   {"config", config.name}, {"ranks", config.ranks}, {"efficiency", efficiency}})
                       .dump()
                << "\n";
      }
    }
  }
  const std::string note = part.value("note", "");
  if (!note.empty()) fmt::print("\n{}\n", note);
  return reference_ok ? 0 : 1;
}

}  // namespace

std::string format_mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0)); }

RunOutcome run_for_result(std::vector<std::string> argv, bool passthrough, double timeout_s, int ranks) {
  RunOutcome outcome;
  const fs::path json = build_dir() / fmt::format(".run-{}.jsonl", getpid());
  fs::remove(json);
  argv.push_back("--json");
  argv.push_back(json.string());
  argv = launch_command(ranks, argv);
  ProcessOptions options;
  options.capture = !passthrough;
  options.timeout_s = timeout_s;
  if (ranks > 1) options.env = mpi_environment();
  const auto begin = std::chrono::steady_clock::now();
  ProcessResult done = run_process(argv, options);
  outcome.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::ifstream in(json);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
    if (parsed.is_object()) outcome.lines.push_back(std::move(parsed));
  }
  fs::remove(json);
  if (done.exit_code == 0 && !last.empty()) {
    outcome.result = nlohmann::json::parse(last, nullptr, false);
    outcome.ok = outcome.result.is_object() && outcome.result.value("type", "") == "result";
  }
  if (!outcome.ok) {
    std::string complaint;
    for (const char* marker : {"not done yet: ", "error: ", "internal error: "}) {
      const size_t at = done.output.find(marker);  // the first complaint the program printed
      if (at != std::string::npos) {
        complaint = done.output.substr(at, done.output.find('\n', at) - at);
        break;
      }
    }
    if (complaint.empty()) complaint = done.timed_out ? "time limit reached" : fmt::format("exit status {}", done.exit_code);
    outcome.error = complaint;
  }
  return outcome;
}


int bench_part(const Chapter& chapter, const nlohmann::json& part, std::optional<int> ranks_flag,
               std::optional<int> repeats_flag, std::optional<std::ofstream>& json,
               const std::vector<std::string>& extra_args);

int cmd_bench(const std::string& chapter_name, std::optional<int> ranks, std::optional<int> repeats_flag,
              const std::optional<std::string>& json_file, const std::vector<std::string>& extra_args) {
  const auto chapters = load_chapters();
  const Chapter& chapter = find_chapter(chapters, chapter_name);
  WB_CHECK(!chapter.bench.empty(), "{} has no benchmark", chapter.id);
  WB_CHECK(ranks.value_or(1) <= chapter.max_ranks, "{} runs on at most {} rank(s), not {}", chapter.id,
           chapter.max_ranks, ranks.value_or(1));
  std::vector<std::string> targets;
  for (const auto& part : chapter.bench) {
    const std::string program = part.value("program", chapter.program);
    targets.insert(targets.end(), {program + "_student", program + "_solution"});
  }
  if (!build_targets(targets, /*quiet=*/false)) return 1;
  std::optional<std::ofstream> json;
  if (json_file) {
    json.emplace(*json_file);
    WB_CHECK(json->is_open(), "--json {}: cannot open for writing", *json_file);
  }
  int status = 0;
  for (size_t i = 0; i < chapter.bench.size(); ++i) {
    if (i > 0) fmt::print("\n\n");
    const int part_status = bench_part(chapter, chapter.bench[i], ranks, repeats_flag, json, extra_args);
    status = status != 0 ? status : part_status;
  }
  return status;
}

// One part of a chapter's benchmark: "scaling", "rows", or (the default) whole
// training runs of every implementation compared by samples/s.
int bench_part(const Chapter& chapter, const nlohmann::json& part, std::optional<int> ranks_flag,
               std::optional<int> repeats_flag, std::optional<std::ofstream>& json,
               const std::vector<std::string>& extra_args) {
  const int repeats = repeats_flag.value_or(part.value("repeats", 3));
  if (part.value("kind", "") == "scaling") return bench_scaling(chapter, part, repeats, extra_args, json);
  // A part may fix its rank count ("ranks"), or only suggest one when --ranks is not given ("default_ranks").
  const int ranks = part.value("ranks", ranks_flag.value_or(part.value("default_ranks", 1)));
  const std::string program = part.value("program", chapter.program);
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks);
  std::vector<std::string> args = {"--threads", std::to_string(threads)};
  for (const auto& a : part.value("args", std::vector<std::string>{})) args.push_back(a);  // the part's flags win
  args.insert(args.end(), extra_args.begin(), extra_args.end());  // and the user's win over both
  std::vector<Impl> impls = bench_impls(chapter, part, program, args);

  fmt::print("{} bench{}: {} {}, {} rank(s); {} run(s) of each, interleaved; medians\n", chapter.id,
             part.contains("title") ? ", " + part.value("title", "") : "", program, fmt::join(args, " "), ranks,
             repeats);
  run_interleaved(impls, repeats, ranks, json);
  if (part.value("kind", "") == "rows") return bench_rows(chapter, part, impls, json);
  if (part.value("kind", "") == "bandwidth") return bench_bandwidth(chapter, part, impls, json);

  const double reference_rate = medians_of(impls[1]).samples_per_s;
  fmt::print("\n{:<16} {:>11} {:>9} {:>9} {:>12} {:>13}\n", "impl", "samples/s", "epoch_s", "test_acc", "peak_mem",
             "vs_reference");
  for (const Impl& impl : impls) {
    const RunMedians m = medians_of(impl);
    if (m.runs == 0) {
      const std::string error = impl.error();
      fmt::print("{:<16} {}\n", impl.name, error.substr(0, error.find(": replace")));
      continue;
    }
    const double ratio = reference_rate > 0 ? m.samples_per_s / reference_rate : 0.0;
    fmt::print("{:<16} {:>11.1f} {:>9.2f} {:>9.4f} {:>12} {:>12.2f}x\n", impl.name, m.samples_per_s, m.epoch_s,
               m.test_accuracy, format_mib(m.peak_mem_bytes), ratio);
    if (json)
      *json << nlohmann::json({{"type", "bench"}, {"chapter", chapter.id}, {"impl", impl.name}, {"ranks", ranks},
                               {"threads", threads}, {"runs", m.runs}, {"samples_per_s", m.samples_per_s},
                               {"epoch_s", m.epoch_s}, {"test_accuracy", m.test_accuracy},
                               {"peak_mem_bytes", m.peak_mem_bytes}, {"vs_reference", ratio}})
                   .dump()
            << "\n";
  }
  const std::string note = part.value("note", "");
  if (!note.empty()) fmt::print("\n{}\n", note);
  return reference_rate > 0 ? 0 : 1;  // without the reference there is nothing to compare with
}

int cmd_info() {
  const GpuRuntimeInfo gpu = gpu_runtime_info();
  fmt::print("workbook build   {}\n", build_dir().string());
  fmt::print("LibTorch         {}\n", config::torch_version);
  fmt::print("cores            {}\n", std::thread::hardware_concurrency());
  fmt::print("MPI launcher     {}\n", config::mpiexec.empty() ? "not found" : std::string(config::mpiexec));
  if (gpu.built_with_nccl)
    fmt::print("CUDA runtime     {}\nNCCL             {}\nCUDA devices     {}{}\n", gpu.cuda_runtime, gpu.nccl,
               gpu.devices, gpu.note.empty() ? "" : " (" + gpu.note + ")");
  else
    fmt::print("CUDA, NCCL       {}\n", gpu.note);
  std::string data;
  try {
    data = find_fashion_mnist(std::nullopt).string();
  } catch (const UserError& e) {
    data = e.what();
  }
  fmt::print("Fashion-MNIST    {}\n", data);
  return 0;
}

}  // namespace workbook::cli
