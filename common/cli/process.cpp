// process.cpp — starting programs (builds, tests, training runs) and reading their results.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "cli.hpp"
#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {
namespace {

// Note: a child with a time limit runs in its own process group (below), so
// the terminal's Ctrl-C does not reach it. While it runs we catch SIGINT,
// SIGTERM and SIGHUP, pass them on to its group, and then die of the same signal.
volatile sig_atomic_t g_signal = 0;
void remember_signal(int signal_number) { g_signal = signal_number; }

// Two children may be waited on at once, from two threads (`dev mutants`
// tests two mutants together): the first wait installs the handlers, the last
// puts back what was there and, if a signal came, dies of it.
constexpr int kForwarded[3] = {SIGINT, SIGTERM, SIGHUP};
std::mutex g_forwarding_mutex;
int g_forwarding = 0;
struct sigaction g_previous[3];

void start_forwarding() {
  std::lock_guard<std::mutex> lock(g_forwarding_mutex);
  if (g_forwarding++ > 0) return;
  g_signal = 0;
  struct sigaction forward {};
  forward.sa_handler = remember_signal;
  sigemptyset(&forward.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &forward, &g_previous[i]);
}

void stop_forwarding() {
  std::lock_guard<std::mutex> lock(g_forwarding_mutex);
  if (--g_forwarding > 0) return;
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &g_previous[i], nullptr);
  if (g_signal != 0) raise(g_signal);  // die as the user asked, after the children
}

// Reads what is left in the pipe for at most `seconds`.
void drain(int fd, std::string& output, double seconds) {
  const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buffer[4096];
  while (std::chrono::steady_clock::now() < stop) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got <= 0) return;
    output.append(buffer, static_cast<size_t>(got));
  }
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  WB_ASSERT(!argv.empty(), "empty command");
  int pipe_fds[2] = {-1, -1};
  if (options.capture) WB_ASSERT(pipe(pipe_fds) == 0, "pipe: {}", std::strerror(errno));
  const pid_t pid = fork();
  WB_ASSERT(pid >= 0, "fork: {}", std::strerror(errno));
  if (pid == 0) {
    // Note: a child with a time limit gets its own process group, so that a
    // timeout ends it and everything it started (mpirun's ranks) together.
    if (options.timeout_s > 0) setpgid(0, 0);
    if (options.capture) {
      dup2(pipe_fds[1], STDOUT_FILENO);
      dup2(pipe_fds[1], STDERR_FILENO);
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    for (const auto& [key, value] : options.env) setenv(key.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    fmt::print(stderr, "workbook: cannot start {}: {}\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  const bool own_group = options.timeout_s > 0;
  if (own_group) {
    setpgid(pid, pid);
    start_forwarding();
  }

  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_s);
  if (options.capture) close(pipe_fds[1]);
  bool open = options.capture;
  int status = 0;
  while (true) {
    if (open) {
      pollfd p{pipe_fds[0], POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char buffer[4096];
        const ssize_t got = read(pipe_fds[0], buffer, sizeof buffer);
        if (got > 0) result.output.append(buffer, static_cast<size_t>(got));
        else open = false;
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      // The child is gone; anything it left behind in its group goes too.
      if (own_group) kill(-pid, SIGKILL);
      if (open) drain(pipe_fds[0], result.output, 2.0);
      break;
    }
    if (g_signal != 0) {
      kill(-pid, SIGTERM);
      waitpid(pid, &status, 0);
      break;
    }
    if (options.timeout_s > 0 && std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
  }
  if (options.capture) close(pipe_fds[0]);
  if (own_group) stop_forwarding();
  if (result.timed_out) result.exit_code = 124;
  else if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

bool build_targets(const std::vector<std::string>& targets, bool quiet, bool show_errors) {
  std::vector<std::string> argv = {std::string(config::cmake_command), "--build", build_dir().string(), "--target"};
  argv.insert(argv.end(), targets.begin(), targets.end());
  if (!quiet) fmt::print("building {} ...\n", fmt::join(targets, " "));
  ProcessOptions options;
  options.capture = true;
  ProcessResult built = run_process(argv, options);
  if (built.exit_code == 0) return true;
  if (!show_errors) return false;
  // Show each compiler error with the two lines after it (the code and caret).
  std::istringstream lines(built.output);
  std::string line;
  int shown = 0, context = 0;
  fmt::print("\nThe build failed. The compiler said:\n\n");
  while (std::getline(lines, line) && shown < 40) {
    if (line.find("error") != std::string::npos || line.find("Error") != std::string::npos) context = 3;
    if (context > 0) {
      fmt::print("  {}\n", line);
      --context;
      ++shown;
    }
  }
  if (shown == 0) fmt::print("{}\n", built.output.substr(built.output.size() > 4000 ? built.output.size() - 4000 : 0));
  const fs::path log = build_dir() / "last-build.log";
  std::ofstream(log) << built.output;
  fmt::print("\n(the whole log: {})\n", log.string());
  return false;
}

std::map<std::string, std::string> mpi_environment() {
  // Open MPI refuses to run as root unless told; CI and containers run as
  // root. Only the child launched here gets these, never the user's shell.
  if (geteuid() != 0) return {};
  return {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
}

Placement Placement::on_nodes(int ranks, int nodes) {
  const auto cluster = emulated_cluster();
  WB_CHECK(cluster, "--nodes {} runs on the emulated cluster, which is not up: workbook cluster up --nodes {}", nodes,
           std::max(2, nodes));
  WB_CHECK(nodes <= cluster->nodes, "--nodes {}: the emulated cluster has {} nodes (workbook cluster up --nodes {})",
           nodes, cluster->nodes, nodes);
  Placement placement(ranks);
  placement.nodes = std::min(ranks, nodes);
  WB_CHECK(ranks % placement.nodes == 0, "{} ranks do not divide evenly over {} nodes", ranks, placement.nodes);
  return placement;
}

std::string Placement::describe() const {
  if (nodes == 0) return fmt::format("{} rank(s)", ranks);
  const auto cluster = emulated_cluster();
  return fmt::format("{} rank(s) on {} emulated node(s) ({} per node), linked at {}", ranks, nodes, ranks_per_node(),
                     cluster ? cluster->link : "?");
}

std::vector<std::string> launch_command(const Placement& placement, std::vector<std::string> argv) {
  std::vector<std::string> launched;
  if (placement.nodes > 0) {
    launched = {cluster_script().string(), "mpirun", "--nodes", std::to_string(placement.nodes),
                "--ranks-per-node", std::to_string(placement.ranks_per_node()), "--"};
  } else {
    if (placement.ranks <= 1) return argv;
    WB_CHECK(!config::mpiexec.empty(), "--ranks {} needs MPI, and this build found no mpiexec", placement.ranks);
    launched = {std::string(config::mpiexec), "--oversubscribe", "-n", std::to_string(placement.ranks)};
  }
  launched.insert(launched.end(), argv.begin(), argv.end());
  return launched;
}

}  // namespace workbook::cli
