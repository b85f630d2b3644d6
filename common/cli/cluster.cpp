// cluster.cpp — `workbook cluster up|down|status|...`: the emulated cluster of
// hpc/cluster.sh (ARCHITECTURE.md, "The emulated cluster"), what `run`,
// `bench`, `tour` and `model` need to know of it to place ranks on its nodes,
// and the cluster `tour` and `model` bring up themselves (OwnCluster).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <regex>

#include "cli.hpp"
#include "commands.hpp"

namespace workbook::cli {

fs::path cluster_script() { return source_dir() / "hpc" / "cluster.sh"; }

std::optional<EmulatedCluster> emulated_cluster() {
  std::ifstream state("/run/workbook-cluster/state");  // written by `hpc/cluster.sh up`
  if (!state) return std::nullopt;
  EmulatedCluster cluster;
  for (std::string line; std::getline(state, line);) {
    const auto equals = line.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = line.substr(0, equals), value = line.substr(equals + 1);
    if (key == "nodes") cluster.nodes = std::stoi(value);
    if (key == "link") cluster.link = value;
  }
  if (cluster.nodes < 1) return std::nullopt;
  return cluster;
}

double EmulatedCluster::link_bits_per_s() const {
  // tc's decimal units, as hpc/cluster.sh accepts them: 100mbit, 1gbit, 10gbit.
  size_t digits = 0;
  const double number = std::stod(link, &digits);
  const std::string unit = link.substr(digits);
  return number * (unit == "gbit" ? 1e9 : unit == "mbit" ? 1e6 : unit == "kbit" ? 1e3 : 1.0);
}

nlohmann::json placement_json(const Placement& placement) {
  const auto cluster = emulated_cluster();
  return {{"nodes", placement.nodes},
          {"ranks_per_node", placement.ranks_per_node()},
          {"link", cluster ? cluster->link : ""},
          {"link_bits_per_s", cluster ? cluster->link_bits_per_s() : 0.0}};
}

namespace {

// Note: [a command's own emulated cluster] (cli.hpp): what a signal does
// while one is up. Armed once; a `down` with nothing up does nothing.
void arm_cluster_down_on_signal() {
  static std::string script = cluster_script().string();
  static const char* down_argv[] = {script.c_str(), "down", nullptr};
  static bool armed = false;
  if (armed) return;
  armed = true;
  struct sigaction action {};
  action.sa_handler = [](int signal) {
    const pid_t child = fork();
    if (child == 0) {
      execv(down_argv[0], const_cast<char* const*>(down_argv));
      _exit(127);
    }
    if (child > 0) waitpid(child, nullptr, 0);
    _exit(128 + signal);
  };
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
}

ProcessResult run_cluster_script(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {cluster_script().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.capture = true;
  return run_process(argv, options);
}

}  // namespace

void check_own_cluster_can_start(const std::string& command, const std::vector<std::string>& links) {
  static const std::regex rate("[1-9][0-9]*(kbit|mbit|gbit)");  // hpc/cluster.sh's rates
  for (const std::string& link : links)
    WB_CHECK(std::regex_match(link, rate), "--links {}: give rates such as 100mbit, 1gbit or 10gbit", link);
  if (const auto up = emulated_cluster())
    throw UserError(fmt::format("an emulated cluster is up ({} nodes at {}): `workbook cluster down` first; "
                                "`workbook {}` brings up its own", up->nodes, up->link, command));
}

std::optional<std::string> OwnCluster::up(int nodes, const std::string& link) {
  arm_cluster_down_on_signal();
  const ProcessResult made = run_cluster_script({"up", "--nodes", std::to_string(nodes), "--link", link});
  if (made.exit_code != 0) return made.output.substr(0, made.output.find_last_not_of('\n') + 1);
  brought_up_ = true;
  return std::nullopt;
}

void OwnCluster::down() {
  if (!brought_up_) return;
  brought_up_ = false;
  run_cluster_script({"down"});
  fmt::print("(the emulated cluster {} brought up is down again)\n", owner_);
  std::fflush(stdout);
}

// The script is the one implementation (an instructor can run it without the
// CLI); this command only passes the arguments on and returns its status.
int cmd_cluster(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {cluster_script().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.env = mpi_environment();  // for `cluster mpirun`
  return run_process(argv, options).exit_code;
}

}  // namespace workbook::cli
