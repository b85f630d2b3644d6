// cluster.cpp — `workbook cluster up|down|status|...`: the emulated cluster of
// hpc/cluster.sh (ARCHITECTURE.md, "The emulated cluster"), and what `run`,
// `bench` and `tour` need to know of it to place ranks on its nodes.
#include <fstream>

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
