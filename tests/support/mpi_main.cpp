// mpi_main.cpp — the Catch2 runner of the multi-process tests.
//
//   mpirun --oversubscribe -n 2 test_ch03_solution [Catch2 arguments]
//
// Every rank runs every test. After each test case the ranks combine their
// outcomes on rank 0: a test passes only if it passed on every rank, and a
// failure is reported with the rank it happened on. Rank 0 prints Catch2's
// report; the other ranks print their own failures as they happen, prefixed
// with their rank. The exit status is non-zero on every rank when any rank
// failed. It writes $WORKBOOK_RESULTS (rank 0) as catch_main.cpp does.
//
// Note: [No test can hang]
// - Each call a Communicator makes is watched (watchdog.hpp): one that has
//   not returned in 30 s here ends the process, naming the rank and the call.
// - Each test case is watched as a whole: past its limit (120 s, 900 s for
//   [slow] and [timing] tests; $WORKBOOK_TEST_TIME_LIMIT sets the first) the
//   process ends, naming the rank, the test and the last collective entered.
// - Collectives are checked across ranks before they run, so a mismatch
//   fails at once on every rank with both calls named.
// - A peer that dies makes the launcher stop the others; each says where it was.
// - A check that fails or throws on one rank ends the others' wait within
//   seconds, with that check's words (Note [A failed check is heard by every rank]).
// The runner's own messages travel on MPI communicators of their own, so they
// never match a test's collectives, even when ranks leave a test at different points.
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // a listener's types (catch2_compat.hpp)
#include "catch2_compat.hpp"
#include <mpi.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mpi_test.hpp"
#include "test_record.hpp"
#include "workbook/allocator.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/watchdog.hpp"

namespace {

workbook::LaunchEnv g_env;
MPI_Comm g_results = MPI_COMM_NULL;  // carries test outcomes to rank 0
MPI_Comm g_agree = MPI_COMM_NULL;    // carries mpi_test::all_ranks

// Note: [A failed check is heard by every rank]
// A check that fails with REQUIRE, or an expression that throws, ends the
// test on its rank only; the other ranks may then wait in a collective that
// rank will never make, and the first words a student read were a waiting
// rank's time-out, 30 s later. So each rank appends its first failure in a
// test, as one JSON line, to a notice file rank 0 creates at start-up (the
// path goes to every rank over MPI), and the watchdog of every rank reads it
// while a call waits (watchdog.hpp): a rank still waiting 5 s after a peer's
// failure ends with that failure's rank, check and message, and rank 0
// records it as the test's failure. A rank that failed itself, waiting at
// the test's end for ranks that do not come, ends after 10 s, so that a
// waiting rank 0 goes first and records it (a failed rank 0 records its
// failure before it waits). A rank that waits in a call shared with
// the failed rank only stops waiting if the test really desynchronized:
// ranks that reach the test's end together go on to the next test.
// The file is read and written without MPI, since the watchdog's thread
// may not call MPI while the main thread waits in it. Ranks on other
// machines without a shared temporary folder do not see it, and wait out
// the 30 s as before.
constexpr double kPeerFailureGrace = 5.0, kOwnFailureGrace = 10.0;
std::string g_notice_path;            // the same on every rank
std::atomic<int> g_test_number{0};    // the test case in progress, counted from 1

// Note: [a deadlock is named, not timed out] (watchdog.hpp): the runner's
// own collectives are on the wait board too, so that a rank that has left a
// test's exchanges for the end of the test is seen waiting there.
workbook::watchdog::Waiting everyone(std::string collective) {
  workbook::watchdog::Waiting waiting;
  waiting.collective = std::move(collective);
  for (int r = 0; r < g_env.world_size; ++r) waiting.group.push_back(r);
  return waiting;
}


// Appends this rank's failure in the current test for the other ranks to read.
void post_failure_notice(const nlohmann::json& failure, const std::string& test_name) {
  if (g_notice_path.empty()) return;
  nlohmann::json notice = {{"test", g_test_number.load()}, {"name", test_name}, {"failure", failure}};
  std::string message = notice["failure"].value("message", "");
  if (message.size() > 1500) notice["failure"]["message"] = message.substr(0, 1500) + " ...";
  const std::string line = notice.dump() + "\n";
  const int fd = open(g_notice_path.c_str(), O_WRONLY | O_APPEND);  // never created here: rank 0 owns it
  if (fd < 0) return;
  const ssize_t written = write(fd, line.data(), line.size());  // one append: lines never interleave
  (void)written;
  close(fd);
}

std::mutex g_heard_mutex;
nlohmann::json g_heard;  // the failure the probe last reported (rank 0 records it)

// The watchdog's probe: a failure posted in the test in progress, this
// rank's own before another's.
std::optional<workbook::watchdog::PeerFailure> heard_failure() {
  static std::vector<nlohmann::json> notices;  // the watchdog's thread only
  static std::string pending;
  static off_t read_up_to = 0;
  if (g_notice_path.empty()) return std::nullopt;
  const int fd = open(g_notice_path.c_str(), O_RDONLY);
  if (fd < 0) return std::nullopt;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = pread(fd, buffer, sizeof buffer, read_up_to)) > 0) {
    read_up_to += got;
    pending.append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
    nlohmann::json notice = nlohmann::json::parse(pending.substr(0, end), nullptr, /*allow_exceptions=*/false);
    if (notice.is_object()) notices.push_back(std::move(notice));
  }
  const int test = g_test_number.load();
  const nlohmann::json* own = nullptr;
  const nlohmann::json* peer = nullptr;
  for (const nlohmann::json& notice : notices) {
    if (notice.value("test", 0) != test) continue;
    const int rank = notice["failure"].value("rank", -1);
    if (rank != g_env.rank && peer == nullptr) peer = &notice;
    if (rank == g_env.rank && own == nullptr) own = &notice;
  }
  // A rank that failed itself waits at the test's end: it names its own failure, and waits longer.
  const nlohmann::json* chosen = own ? own : peer;
  if (chosen == nullptr) return std::nullopt;
  const nlohmann::json& failure = (*chosen)["failure"];
  const std::string message = failure.value("message", "");
  const std::string check = failure.value("expression", "");
  {
    std::lock_guard<std::mutex> lock(g_heard_mutex);
    g_heard = failure;
  }
  // An exception thrown between checks has no expression ("{Unknown expression ...}").
  const std::string where = fmt::format(
      "test \"{}\" at {}:{}{}{}", chosen->value("name", ""),
      std::filesystem::path(failure.value("file", "")).filename().string(), failure.value("line", 0),
      check.empty() || check[0] == '{' ? "" : ", check " + check, message.empty() ? "" : ": " + message.substr(0, message.find('\n')));
  if (!own) {
    const int rank = failure.value("rank", -1);
    return workbook::watchdog::PeerFailure{
        fmt::format("rank {} of {} failed in {}; it left the test, so this call cannot complete", rank,
                    g_env.world_size, where),
        kPeerFailureGrace};
  }
  return workbook::watchdog::PeerFailure{
      fmt::format("this rank failed in {} (above) and the other ranks did not reach the test's end", where),
      kOwnFailureGrace};
}

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) {
    fmt::print(stderr, "{}: test runner: {} failed (code {})\n", g_env.label(), call, code);
    std::_Exit(1);
  }
}

// Every rank's `mine`, on every rank: each waits here for all (a gather to
// rank 0 would let the others run ahead into the next test).
std::vector<std::string> allgather_strings(const std::string& mine) {
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(g_env.world_size)), offsets(lengths.size());
  check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, g_results), "MPI_Allgather");
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, g_results),
        "MPI_Allgatherv");
  std::vector<std::string> parts;
  for (size_t r = 0; r < lengths.size(); ++r) parts.push_back(all.substr(static_cast<size_t>(offsets[r]), lengths[r]));
  return parts;
}

class MpiResultsListener : public catch2_compat::ListenerBase {
 public:
  using catch2_compat::ListenerBase::ListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    std::lock_guard<std::timed_mutex> lock(mutex_);
    current_ = test_record::start(info);
    ++g_test_number;
    const std::vector<std::string> tags = catch2_compat::tags(info);
    const bool long_test = std::count(tags.begin(), tags.end(), "slow") + std::count(tags.begin(), tags.end(), "timing") > 0;
    double limit = long_test ? 900.0 : 120.0;
    if (const char* text = std::getenv("WORKBOOK_TEST_TIME_LIMIT"); text && !long_test) limit = std::atof(text);
    workbook::watchdog::arm(fmt::format("test \"{}\"", info.name), limit);
  }

  void assertion_ended(const Catch::AssertionStats& stats) override {
    const Catch::AssertionResult& result = stats.assertionResult;
    if (result.isOk()) return;
    if (result.getResultType() == Catch::ResultWas::FatalErrorCondition) fatal_ = true;
    // After a signal, this runs inside the signal handler, on the thread the
    // signal interrupted (which may hold the lock): never wait for it then.
    std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
    if (fatal_ ? !lock.try_lock() : (lock.lock(), false)) return;
    nlohmann::json failure = test_record::failure(stats);
    failure["rank"] = g_env.rank;
    const std::string message = failure["message"];
    const std::string messages = failure["info"];
    if (!current_.contains("failure")) {
      current_["failure"] = failure;
      post_failure_notice(failure, current_.value("name", ""));
    }
    if (g_env.rank != 0) {  // rank 0's failures are in Catch2's own report
      fmt::print(stderr, "\n{}: FAILED in test \"{}\" at {}:{}\n", g_env.label(), current_.value("name", ""),
                 result.getSourceInfo().file, result.getSourceInfo().line);
      if (result.hasExpression())
        fmt::print(stderr, "  {}\n  with expansion: {}\n", result.getExpressionInMacro(), result.getExpandedExpression());
      if (!message.empty()) fmt::print(stderr, "  {}\n", message);
      if (!messages.empty()) fmt::print(stderr, "  {}", messages);
    }
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
    if (fatal_ ? !lock.try_lock() : (lock.lock(), false)) return;
    current_["passed"] = stats.totals.assertions.failed == 0;
    // A signal (a crash, or the launcher stopping the job): Catch2 ends the
    // test case and the run from inside its signal handler. Nothing may wait
    // on other ranks from here on (they may be gone): rank 0 records what it
    // has, and the signal then ends the process (watchdog.hpp).
    if (fatal_) {
      if (g_env.rank == 0 && !g_notice_path.empty()) unlink(g_notice_path.c_str());
      current_["aborted"] = true;
      records_.push_back(current_);
      return;
    }
    // Combine on rank 0: passed on every rank, or the first failure with its rank.
    const std::string mine = current_.dump();
    // Rank 0 records its own failure before it waits: if a rank it left
    // behind ends first, the launcher stops rank 0 where it waits.
    if (g_env.rank == 0 && !current_["passed"].get<bool>()) {
      nlohmann::json provisional = current_;
      provisional["aborted"] = true;
      provisional["failure"]["message"] = fmt::format("rank 0 of {}: {}", g_env.world_size,
                                                      current_["failure"].value("message", ""));
      write_results(&provisional);
    }
    lock.unlock();  // the watchdog's hook may need the state while this waits for the other ranks
    std::vector<std::string> outcomes;
    {
      workbook::watchdog::CallScope scope(fmt::format("the end of test \"{}\" (every rank's outcome)",
                                                      current_.value("name", "")), 0.0,
                                          everyone(fmt::format("the end of test #{}", g_test_number.load())));
      outcomes = allgather_strings(mine);
    }
    lock.lock();
    workbook::watchdog::disarm();
    if (g_env.rank != 0) return;
    nlohmann::json merged = current_;
    merged.erase("failure");
    merged["passed"] = true;
    for (int r = 0; r < g_env.world_size; ++r) {
      const nlohmann::json outcome = nlohmann::json::parse(outcomes[static_cast<size_t>(r)]);
      if (outcome.value("passed", false)) continue;
      if (merged["passed"].get<bool>()) {
        merged["passed"] = false;
        if (outcome.contains("failure")) {
          merged["failure"] = outcome["failure"];
          const std::string message = outcome["failure"].value("message", "");
          merged["failure"]["message"] = message.empty() ? fmt::format("rank {} of {}", r, g_env.world_size)
                                                         : fmt::format("rank {} of {}: {}", r, g_env.world_size, message);
        }
      }
      if (r != 0) fmt::print("test \"{}\" failed on rank {} (its message is above)\n", merged.value("name", ""), r);
    }
    records_.push_back(merged);
  }

  void testRunEnded(const Catch::TestRunStats&) override {
    std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
    if (fatal_ ? !lock.try_lock() : (lock.lock(), false)) return;
    write_results();
  }

  bool fatal() const { return fatal_; }

  // Called by the watchdog (on its thread) when it ends this process: the
  // test in progress is recorded as failed with the watchdog's message.
  void write_stopped(const std::string& message) {
    if (g_env.rank != 0) return;
    // The main thread may be stuck holding the lock (or in the middle of an
    // update): wait a moment, and write nothing rather than a torn record.
    std::unique_lock<std::timed_mutex> lock(mutex_, std::chrono::seconds(2));
    if (!lock.owns_lock()) return;
    nlohmann::json stopped = current_;
    stopped["passed"] = false;
    stopped["aborted"] = true;
    nlohmann::json heard;
    {
      std::lock_guard<std::mutex> heard_lock(g_heard_mutex);
      heard = g_heard;
    }
    if (heard.is_object()) {  // a rank's failed check ended the test: that is its failure
      stopped["failure"] = heard;
      stopped["failure"]["message"] = fmt::format("rank {} of {}: {}", heard.value("rank", -1), g_env.world_size,
                                                  heard.value("message", ""));
    } else {
      stopped["failure"] = {{"file", current_.value("file", "")}, {"line", current_.value("line", 0)},
                            {"message", message}, {"rank", g_env.rank}};
    }
    records_.push_back(stopped);
    write_results();
  }

  static MpiResultsListener* instance;

 private:
  // The records so far, and `also` after them (a test still in progress).
  void write_results(const nlohmann::json* also = nullptr) {
    const char* path = std::getenv("WORKBOOK_RESULTS");
    if (g_env.rank != 0 || path == nullptr || *path == '\0') return;
    nlohmann::json records = records_;
    if (also) records.push_back(*also);
    std::ofstream out(path);
    out << records.dump(1) << "\n";
  }

  nlohmann::json current_;
  nlohmann::json records_ = nlohmann::json::array();
  bool fatal_ = false;
  std::timed_mutex mutex_;  // current_ and records_: the watchdog's thread reads them too
};

MpiResultsListener* MpiResultsListener::instance = nullptr;

// Catch2 constructs listeners itself; this one registers the instance the watchdog hook uses.
class RegisteringListener : public MpiResultsListener {
 public:
  explicit RegisteringListener(catch2_compat::ListenerConfig config) : MpiResultsListener(config) { instance = this; }
};

}  // namespace

CATCH_REGISTER_LISTENER(RegisteringListener)

namespace mpi_test {

const workbook::LaunchEnv& env() { return g_env; }

std::unique_ptr<workbook::Communicator> communicator() {
  return workbook::make_communicator(workbook::Backend::Mpi, g_env, workbook::CommunicatorOptions::from_environment());
}

bool all_ranks(bool condition) {
  int mine = condition ? 1 : 0, all = 0;
  static int calls = 0;
  workbook::watchdog::CallScope scope("mpi_test::all_ranks", 30.0,
                                      everyone(fmt::format("mpi_test::all_ranks #{}", ++calls)));
  check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, g_agree), "MPI_Allreduce (all_ranks)");
  return all == 1;
}

}  // namespace mpi_test

// Rank 0 creates the notice file (Note [A failed check is heard by every
// rank]) and tells every rank its path; "" where it could not.
static std::string create_notice_file() {
  std::string path;
  if (g_env.rank == 0) {
    path = (std::filesystem::temp_directory_path() / "workbook-test-notices-XXXXXX").string();
    const int fd = mkstemp(path.data());
    if (fd >= 0) {
      close(fd);
      workbook::watchdog::remove_on_exit(path);
    } else {
      path.clear();
    }
  }
  int length = static_cast<int>(path.size());
  check(MPI_Bcast(&length, 1, MPI_INT, 0, g_results), "MPI_Bcast");
  path.resize(static_cast<size_t>(length));
  check(MPI_Bcast(path.data(), length, MPI_CHAR, 0, g_results), "MPI_Bcast");
  return path;
}

int main(int argc, char** argv) {
  // Line by line, so that what rank 0 printed survives the launcher stopping it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    g_env = workbook::read_launch_env();
  } catch (const std::exception& e) {
    return workbook::exit_code(workbook::report_failure(e));  // a UserError: exit 2
  }
  // The tests' defaults: every collective checked, no call waits more than 30 s.
  setenv("WORKBOOK_CHECK_COLLECTIVES", "1", /*overwrite=*/0);
  setenv("WORKBOOK_COMM_TIMEOUT", "30", 0);
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != g_env.rank || size != g_env.world_size) {
    return workbook::exit_code(workbook::report_failure(workbook::UserError(fmt::format(
        "MPI says rank {} of {}, the launcher ({}) says {}", rank, size, g_env.launcher, g_env.label()))));
  }
  check(MPI_Comm_dup(MPI_COMM_WORLD, &g_results), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &g_agree), "MPI_Comm_dup");
  g_notice_path = create_notice_file();
  if (!g_notice_path.empty()) workbook::watchdog::set_wait_board(g_notice_path, g_env.rank, g_env.world_size);
  workbook::watchdog::set_process_label(g_env.label());
  workbook::watchdog::install_signal_handlers();
  workbook::watchdog::set_before_exit([](const std::string& message) {
    if (MpiResultsListener::instance) MpiResultsListener::instance->write_stopped(message);
  });
  workbook::watchdog::set_peer_failure_probe(heard_failure);

  workbook::tune_cpu_allocator();
  workbook::set_threads(workbook::default_threads_per_rank(g_env));

  // Rank 0 prints Catch2's report; the others' failures are printed by the listener.
  const int failed = catch2_compat::run_session(argc, argv, g_env.rank == 0 ? "" : "/dev/null");

  // Every rank exits non-zero when any rank failed.
  int mine = failed > 0 ? 1 : 0, any = 0;
  check(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, g_results), "MPI_Allreduce (exit status)");
  if (g_env.rank == 0 && !g_notice_path.empty()) unlink(g_notice_path.c_str());
  MPI_Comm_free(&g_results);
  MPI_Comm_free(&g_agree);
  MPI_Finalize();
  return any;
}
