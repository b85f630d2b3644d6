// process.cpp — starting programs (builds, tests, training runs) and reading their results.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli.hpp"
#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

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
  if (options.timeout_s > 0) setpgid(pid, pid);

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
    if (done == pid && !open) break;
    if (done == pid) {  // drain what is left in the pipe
      char buffer[4096];
      ssize_t got;
      while ((got = read(pipe_fds[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, static_cast<size_t>(got));
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
  if (result.timed_out) result.exit_code = 124;
  else if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

bool build_targets(const std::vector<std::string>& targets, bool quiet) {
  std::vector<std::string> argv = {std::string(config::cmake_command), "--build", build_dir().string(), "--target"};
  argv.insert(argv.end(), targets.begin(), targets.end());
  if (!quiet) fmt::print("building {} ...\n", fmt::join(targets, " "));
  ProcessOptions options;
  options.capture = true;
  ProcessResult built = run_process(argv, options);
  if (built.exit_code == 0) return true;
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
  // Open MPI refuses to run as root unless told; CI and containers run as root.
  return {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
}

}  // namespace workbook::cli
