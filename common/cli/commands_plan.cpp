// commands_plan.cpp — `workbook plan`: Chapter 11's plan held against the
// emulated cluster. For each link it brings up a cluster of its own, 2 nodes
// (OwnCluster, Note: [a command's own emulated cluster]), and runs the
// reference ch11_plan on 4 ranks, 2 a node: the machine measured, every
// layout of the GPT predicted and ranked (ex11.6), then each measured. Its
// "plan" lines, with the configuration, go to build/<preset>/plan/plan.jsonl.
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "cli.hpp"
#include "commands.hpp"
#include "predictions.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

int cmd_plan(std::vector<std::string> links, bool predict_only, const std::optional<std::string>& json_file) {
  if (links.empty()) links = {"1gbit"};
  check_own_cluster_can_start("plan", links);
  // The student's predictions, read before anything runs (a malformed line stops here).
  const auto chapters = load_chapters();
  const Chapter& chapter = find_chapter(chapters, "ch11");
  const std::map<std::string, double> predicted = read_predictions(chapter.predictions_file(), chapter.predictions, chapter.id);
  const char* const program = "ch11_plan";
  if (!build_targets({std::string(program) + "_solution"}, /*quiet=*/false)) return 1;
  const fs::path json_path = fs::absolute(json_file ? fs::path(*json_file) : build_dir() / "plan" / "plan.jsonl");
  fs::create_directories(json_path.parent_path());
  std::ofstream out(json_path);
  WB_CHECK(out.is_open(), "{}: cannot open for writing", json_path.string());

  constexpr int nodes = 2, ranks = 4;
  OwnCluster cluster("`workbook plan`");
  int failures = 0;
  std::vector<nlohmann::json> lines;  // every line written, for the predictions
  for (const std::string& link : links) {
    cluster.down();  // the previous link's
    fmt::print("\n== {} ranks on {} nodes at {} ==\n", ranks, nodes, link);
    std::fflush(stdout);  // before the program's own output
    if (const auto cannot = cluster.up(nodes, link)) {
      fmt::print(stderr, "\nworkbook plan: the emulated cluster did not come up:\n{}\n", *cannot);
      return 1;
    }
    std::vector<std::string> argv = {(build_dir() / "bin/solution" / program).string(), "--threads", "1"};
    if (predict_only) argv.push_back("--predict-only");
    const RunOutcome outcome = run_for_result(argv, /*passthrough=*/true, 3600, Placement::on_nodes(ranks, nodes),
                                              json_path.parent_path() / fmt::format(".plan-run-{}.jsonl", getpid()));
    const nlohmann::json where = {{"nodes", nodes}, {"ranks", ranks}, {"link", link},
                                  {"link_bits_per_s", EmulatedCluster{nodes, link}.link_bits_per_s()}};
    if (!outcome.ok) {
      ++failures;
      fmt::print("  failed: {}\n", outcome.error);
      nlohmann::json line = {{"type", "plan"}, {"kind", "error"}, {"error", outcome.error}};
      line.update(where);
      out << line.dump() << "\n";
      lines.push_back(std::move(line));
      continue;
    }
    for (nlohmann::json line : outcome.lines) {
      if (line.value("type", "") != "plan" && line.value("type", "") != "result") continue;
      line.update(where);
      out << line.dump() << "\n";
      lines.push_back(std::move(line));
    }
  }
  cluster.down();
  if (!predict_only)
    print_predictions(chapter.predictions, predicted, lines, relative_to_source(chapter.predictions_file().string()));
  fmt::print("\nresults: {}\n", json_path.string());
  return failures == 0 ? 0 : 1;
}

}  // namespace workbook::cli
