// commands.hpp — one function per `workbook` command; each returns the exit status.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace workbook::cli {

// Every exercise's state as the last `workbook check` found it; check_first
// (--check): the chapters changed from their skeletons are built and checked first.
int cmd_list(bool check_first);
int cmd_check(const std::optional<std::string>& target);
int cmd_hint(const std::string& exercise, bool all, bool reset);
// nodes: on the emulated cluster (0: this machine), ranks_per_node on each.
int cmd_run(const std::string& chapter, const std::optional<std::string>& program, bool solution, int ranks,
            int nodes, const std::vector<std::string>& args);
// part: only that part of the chapter's bench (1: the first), or every part.
int cmd_bench(const std::string& chapter, std::optional<int> ranks, std::optional<int> nodes, std::optional<int> repeats,
              std::optional<int> part, const std::optional<std::string>& json,
              const std::vector<std::string>& extra_args);
int cmd_cluster(const std::vector<std::string>& args);
// `workbook grade ARGS...`: common/grade/grade.py (Note [the grader is Python]).
int cmd_grade(const std::vector<std::string>& args);
// Which sizes `workbook tour` runs: the default's (within 5 minutes on 2 cores,
// whatever the number of chapters), --long's, --full's, or --smoke's (CI).
enum class TourScale { Default, Long, Full, Smoke };
int cmd_tour(TourScale scale, const std::optional<std::string>& json, const std::optional<std::string>& csv);
// Empty nodes or links: the defaults (2,4 and 100mbit,1gbit,10gbit; with quick 2 and 1gbit).
// `workbook plan`: Chapter 11's ch11_plan on 2 emulated nodes of 2 ranks at each link.
int cmd_plan(std::vector<std::string> links, bool predict_only, const std::optional<std::string>& json);
int cmd_model(std::vector<int> nodes, std::vector<std::string> links, bool quick, const std::optional<std::string>& json,
              bool no_steps);
int cmd_report(const std::vector<std::string>& files, const std::optional<std::string>& out_dir, bool table_only = false);
int cmd_info();
int cmd_dev_sync(bool dry_run);
int cmd_dev_check(bool reference_run);
int cmd_dev_mutants(const std::optional<std::string>& exercise);

}  // namespace workbook::cli
