// commands_bench.cpp — `workbook bench chNN`: the student's build, the
// reference build and the chapter's baselines, run in turns, each part of the
// chapter's benchmark in the order its manifest lists them. The tables are
// bench_tables.cpp's.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <thread>

#include "bench.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "predictions.hpp"
#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

std::string Impl::error() const {
  for (auto run = runs.rbegin(); run != runs.rend(); ++run)
    if (!run->ok) return run->error;
  return "";
}

bool Impl::not_done() const { return !runs.empty() && runs.back().status == ExitStatus::NotImplemented; }

void JsonFile::open(const std::string& file) {
  file_.emplace(file);
  WB_CHECK(file_->is_open(), "--json {}: cannot open for writing", file);
}

void JsonFile::write(nlohmann::json line) {
  line["part"] = part;
  if (is_open()) *file_ << line.dump() << "\n";
  if (line.value("type", "") != "bench_run") lines_.push_back(std::move(line));
}

namespace {

// Replaces {chapter_dir}, {source_dir}, {build_dir} and {python} (the Python
// whose torch the build uses: the project's .venv, WorkbookTorch.cmake) in a
// baseline's command line.
std::string expand(std::string text, const Chapter& chapter) {
  const std::pair<std::string, std::string> names[] = {
      {"{chapter_dir}", (source_dir() / "chapters" / chapter.folder).string()},
      {"{source_dir}", source_dir().string()},
      {"{build_dir}", build_dir().string()},
      {"{python}", std::string(workbook::config::python)}};
  for (const auto& [key, value] : names)
    for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  return text;
}

// The device the run's flags ask for: the last --device wins, as in the programs.
std::string device_kind(const std::vector<std::string>& args) {
  std::string device = "cpu";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--device" && i + 1 < args.size()) device = args[i + 1];
    else if (args[i].rfind("--device=", 0) == 0) device = args[i].substr(9);
  }
  return device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
}

// The student's build, the reference build and the part's baselines that this
// device can run (a baseline's "needs"), each with `args` after its command.
std::vector<Impl> bench_impls(const Chapter& chapter, const BenchPart& part, const std::vector<std::string>& args) {
  std::vector<Impl> impls = {{"student", {(build_dir() / "bin/student" / part.program).string()}, {}},
                             {"reference", {(build_dir() / "bin/solution" / part.program).string()}, {}}};
  const std::string device = device_kind(args);
  for (const Baseline& baseline : part.baselines) {
    if (!baseline.needs.empty() && baseline.needs != device) continue;
    Impl impl{baseline.name, {}, {}};
    for (const std::string& word : baseline.command) impl.argv.push_back(expand(word, chapter));
    impls.push_back(impl);
  }
  for (Impl& impl : impls) impl.argv.insert(impl.argv.end(), args.begin(), args.end());
  return impls;
}

// `ranks` on this machine, or over the emulated cluster's nodes with --nodes.
Placement place(int ranks, std::optional<int> nodes) {
  return nodes ? Placement::on_nodes(ranks, *nodes) : Placement(ranks);
}

// Runs `impl` once more, saying so as `label`; returns false without running
// when its last run stopped at an exercise not written yet.
bool run_once(Impl& impl, const Placement& placement, const std::string& label) {
  if (impl.not_done()) return false;
  fmt::print("  run {} ...\n", label);
  std::fflush(stdout);
  impl.runs.push_back(run_for_result(impl.argv, /*passthrough=*/false, 3600, placement));
  if (!impl.runs.back().ok) fmt::print("    {}\n", impl.runs.back().error);
  return true;
}

// Runs every implementation `repeats` times. Note: runs are interleaved
// (A B C A B C ...) so that a slow spell of a busy machine hits every
// implementation alike; the tables report medians, which resist outliers.
void run_interleaved(std::vector<Impl>& impls, int repeats, const Placement& placement, JsonFile& json) {
  for (int r = 0; r < repeats; ++r)
    for (Impl& impl : impls) {
      if (!run_once(impl, placement, fmt::format("{}/{}: {}", r + 1, repeats, impl.name)) || !json.is_open()) continue;
      const RunOutcome& o = impl.runs.back();
      nlohmann::json line = {{"type", "bench_run"}, {"impl", impl.name}, {"repeat", r}, {"ok", o.ok}};
      if (placement.nodes > 0) line["placement"] = placement_json(placement);
      if (o.ok) line["result"] = o.result;
      else line["error"] = o.error;
      json.write(line);
    }
}

// A scaling part: every implementation at every configuration (ranks x
// threads per rank), interleaved the same way.
int bench_scaling(const Chapter& chapter, const BenchPart& part, int repeats, std::optional<int> nodes,
                  const std::vector<std::string>& extra_args, JsonFile& json) {
  std::vector<ScalingRuns> configs;
  for (const ScalingConfig& config : part.configs) {
    std::vector<std::string> args = part.args;
    args.insert(args.end(), {"--threads", std::to_string(config.threads)});
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    configs.push_back({config, bench_impls(chapter, part, args)});
  }
  fmt::print("{} bench, {}\n  {} {}; {} run(s) of each, interleaved; medians\n", chapter.id,
             part.title.empty() ? "scaling" : part.title, part.program, fmt::join(part.args, " "), repeats);
  for (int r = 0; r < repeats; ++r)
    for (ScalingRuns& runs : configs)
      for (Impl& impl : runs.impls)
        run_once(impl, place(runs.config.ranks, nodes),
                 fmt::format("{}/{}: {} at {} ({} rank(s) x {} thread(s))", r + 1, repeats, impl.name,
                             runs.config.name, runs.config.ranks, runs.config.threads));
  return print_scaling_tables(chapter, part, configs, json);
}

// One part of a chapter's benchmark: its runs, then its table.
int bench_part(const Chapter& chapter, const BenchPart& part, std::optional<int> ranks_flag, std::optional<int> nodes,
               std::optional<int> repeats_flag, JsonFile& json, const std::vector<std::string>& extra_args) {
  const int repeats = repeats_flag.value_or(part.repeats);
  if (part.kind == BenchKind::Scaling) return bench_scaling(chapter, part, repeats, nodes, extra_args, json);
  // A part may fix its rank count ("ranks"), or only suggest one when --ranks is not given ("default_ranks").
  const int ranks = part.ranks.value_or(ranks_flag.value_or(part.default_ranks));
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks);
  std::vector<std::string> args = {"--threads", std::to_string(threads)};
  args.insert(args.end(), part.args.begin(), part.args.end());    // the part's flags win
  args.insert(args.end(), extra_args.begin(), extra_args.end());  // and the user's win over both
  std::vector<Impl> impls = bench_impls(chapter, part, args);

  const Placement placement = place(ranks, nodes);
  fmt::print("{} bench{}: {} {}, {}; {} run(s) of each, interleaved; medians\n", chapter.id,
             part.title.empty() ? "" : ", " + part.title, part.program, fmt::join(args, " "), placement.describe(),
             repeats);
  run_interleaved(impls, repeats, placement, json);
  switch (part.kind) {
    case BenchKind::Rows: return print_rows_table(chapter, part, impls, json);
    case BenchKind::Bandwidth: return print_bandwidth_table(chapter, part, impls, placement, json);
    case BenchKind::Training:
    case BenchKind::Scaling: break;
  }
  return print_training_table(chapter, part, impls, ranks, threads, json);
}

}  // namespace

int cmd_bench(const std::string& chapter_name, std::optional<int> ranks, std::optional<int> nodes,
              std::optional<int> repeats_flag, std::optional<int> only_part,
              const std::optional<std::string>& json_file, const std::vector<std::string>& extra_args) {
  const auto chapters = load_chapters();
  const Chapter& chapter = find_chapter(chapters, chapter_name);
  WB_CHECK(!chapter.bench.empty(), "{} has no benchmark", chapter.id);
  WB_CHECK(ranks.value_or(1) <= chapter.max_ranks, "{} runs on at most {} rank(s), not {}", chapter.id,
           chapter.max_ranks, ranks.value_or(1));
  WB_CHECK(only_part.value_or(1) <= static_cast<int>(chapter.bench.size()), "{}'s bench has {} part(s), not {}",
           chapter.id, chapter.bench.size(), only_part.value_or(1));
  if (nodes) WB_CHECK(chapter.max_ranks > 1, "{} is a single-process chapter: --nodes needs ranks", chapter.id);
  if (nodes) (void)Placement::on_nodes(*nodes, *nodes);  // the cluster is up and large enough, before building
  // Read before anything is built or run: a malformed line stops here, not after the bench.
  const std::map<std::string, double> predicted = read_predictions(chapter.predictions_file(), chapter.predictions, chapter.id);
  std::vector<std::string> targets;
  for (const BenchPart& part : chapter.bench)
    targets.insert(targets.end(), {part.program + "_student", part.program + "_solution"});
  if (!build_targets(targets, /*quiet=*/false)) return 1;
  JsonFile json;
  if (json_file) json.open(*json_file);
  int status = 0;
  for (size_t i = 0; i < chapter.bench.size(); ++i) {
    if (only_part && static_cast<int>(i) + 1 != *only_part) continue;
    if (i > 0 && !only_part) fmt::print("\n\n");
    json.part = static_cast<int>(i);
    const int part_status = bench_part(chapter, chapter.bench[i], ranks, nodes, repeats_flag, json, extra_args);
    status = status != 0 ? status : part_status;
  }
  print_predictions(chapter.predictions, predicted, json.lines(), relative_to_source(chapter.predictions_file().string()));
  return status;
}

}  // namespace workbook::cli
