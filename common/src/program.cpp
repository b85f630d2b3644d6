// program.cpp — the skeleton of the multi-process programs, and the entry
// points every program ends through (program.hpp).
#include "workbook/program.hpp"

#include <fmt/format.h>

#include "workbook/allocator.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/exit_status.hpp"
#include "workbook/memory.hpp"
#include "workbook/trace.hpp"

namespace workbook {

namespace {

// "ch03_train" -> "ch03"; a name without '_' is its own chapter.
std::string chapter_of(const std::string& program) { return program.substr(0, program.find('_')); }

}  // namespace

Program::Program(ProgramInfo info, std::optional<LaunchEnv> env, int argc, char** argv)
    : info_(std::move(info)),
      chapter_(chapter_of(info_.name)),
      env_(env.value_or(LaunchEnv{})),
      distributed_(env.has_value()),
      argc_(argc),
      argv_(argv),
      app_(info_.description, info_.name) {
  add_train_flags(app_, flags_);
  if (!distributed_) return;  // threads 0: every core this process may use
  comm_options_ = CommunicatorOptions::from_environment();
  add_distributed_flags(app_, comm_options_);
  app_.add_option("--trace", trace_file_,
                  "write a timeline of every rank (Chrome's trace-event JSON: open it in ui.perfetto.dev, or draw "
                  "a step with `workbook report FILE`)");
  flags_.threads = default_threads_per_rank(env_);
}

Program::~Program() = default;

const TrainFlags& Program::parse() {
  WB_ASSERT(!parsed_, "{}: parse() called twice", info_.name);
  // The program may have changed flags() since the flags were added: --help
  // shows the defaults as they are now.
  for (CLI::Option* option : app_.get_options())
    if (!option->get_default_str().empty()) option->capture_default_str();
  parse_train_flags(app_, flags_, argc_, argv_);
  parsed_ = true;
  if (!distributed_) {
    device_ = parse_device(flags_.device);
    json_.open(flags_.json);
  }
  return flags_;
}

int64_t Program::local_batch(int64_t global_batch) const {
  const int n = ranks();
  WB_CHECK(global_batch % n == 0,
           "--batch {} is the global batch and must divide evenly among the {} ranks (each trains on batch / ranks "
           "samples per step): use a multiple of {}",
           global_batch, n, n);
  WB_CHECK(flags_.train_samples < 0 || flags_.train_samples >= n,
           "--train-samples {} is fewer than the {} ranks: every rank needs at least one sample", flags_.train_samples,
           n);
  WB_CHECK(flags_.test_samples < 0 || flags_.test_samples >= n,
           "--test-samples {} is fewer than the {} ranks: every rank evaluates at least one sample", flags_.test_samples,
           n);
  return global_batch / n;
}

Communicator& Program::connect() {
  WB_ASSERT(distributed_ && parsed_ && !comm_, "{}: connect() in a single process, before parse(), or twice",
            info_.name);
  if (trace_file_) {
    const std::filesystem::path folder = std::filesystem::absolute(*trace_file_).parent_path();
    WB_CHECK(std::filesystem::is_directory(folder), "--trace {}: the folder {} does not exist", *trace_file_,
             folder.string());
  }
  comm_ = make_communicator(backend_for(parse_device(flags_.device)), env_, comm_options_);
  json_.open(leader() ? flags_.json : std::nullopt);
  if (trace_file_) trace::start(*trace_file_, *comm_);
  return *comm_;
}

Communicator& Program::comm() {
  WB_ASSERT(comm_, "{}: comm() before connect()", info_.name);
  return *comm_;
}

torch::Device Program::device() const {
  WB_ASSERT(distributed_ ? comm_ != nullptr : parsed_, "{}: device() before connect() or parse()", info_.name);
  return comm_ ? comm_->device() : device_;
}

int64_t Program::peak_memory_bytes() {
  return comm_ ? largest_peak_memory_bytes(*comm_) : workbook::peak_memory_bytes(device());
}

FashionMnist Program::load_data() const {
  return load_training_data(flags_.data, flags_.train_samples, device(), flags_.test_samples);
}

nlohmann::json Program::result_header(const std::string& config) const {
  return {{"type", "result"}, {"chapter", chapter_},        {"config", config},
          {"device", device().str()}, {"ranks", ranks()}, {"threads", flags_.threads}};
}

void Program::finish(const RunResult& r) {
  if (comm_) trace::write(*comm_);
  nlohmann::json line = result_header(r.config);
  line.update({{"epochs", r.epochs},
               {"batch", r.batch},
               {"train_samples", r.train_samples},
               {"samples_per_s", r.samples_per_s},
               {"epoch_s", r.epoch_s},
               {"peak_mem_bytes", r.peak_mem_bytes}});
  if (r.test_accuracy) line["test_accuracy"] = *r.test_accuracy;
  if (r.epochs_trained) line["epochs_trained"] = *r.epochs_trained;
  if (r.local_batch) line["local_batch"] = *r.local_batch;
  if (r.test_correct) line["test_correct"] = *r.test_correct;
  if (r.test_loss) line["test_loss"] = *r.test_loss;
  if (r.weights_sha256) line["weights_sha256"] = *r.weights_sha256;
  line.update(r.details);
  json_.write(line);
  if (!leader()) return;
  if (!r.summary.empty()) {
    fmt::print("{}\n", r.summary);
    return;
  }
  std::string counts;
  if (r.test_correct && r.test_total) counts = fmt::format(" ({}/{})", *r.test_correct, *r.test_total);
  std::string weights;
  if (r.weights_sha256) weights = fmt::format(", weights {}", r.weights_sha256->substr(0, 16));
  fmt::print("result: test accuracy {:.4f}{}, {:.1f} samples/s over {} rank(s), peak memory per rank {}{}\n",
             r.test_accuracy.value_or(0.0), counts, r.samples_per_s, ranks(), format_bytes(r.peak_mem_bytes), weights);
}

void Program::finish(const BenchResult& r) {
  if (comm_) trace::write(*comm_);
  nlohmann::json line = result_header(r.config);
  line["kind"] = "bench";
  line.update(r.headline);
  json_.write(line);
}

// ---- entry points ---------------------------------------------------------------

// Note: [the allocator is tuned at start-up] Every program and test runner
// tunes glibc's allocator before anything allocates (allocator.hpp says why):
// done here, in the entry points, so that no chapter has to remember it.

namespace {
int run_main(const std::function<int()>& body) {
  tune_cpu_allocator();
  try {
    return body();
  } catch (const std::exception& e) {
    return exit_code(report_failure(e));
  }
}
}  // namespace

int run_distributed_main(const std::function<int(const LaunchEnv&)>& body) {
  tune_cpu_allocator();
  LaunchEnv env;
  std::string prefix;
  int status = 0;
  try {
    env = read_launch_env();
    if (env.distributed()) prefix = env.label() + ": ";
    status = body(env);
  } catch (const std::exception& e) {
    status = exit_code(report_failure(e, prefix));
  }
  exit_distributed(status, env);
}

int single_process_main(int argc, char** argv, ProgramInfo info, const std::function<int(Program&)>& body) {
  return run_main([&] {
    Program program(std::move(info), std::nullopt, argc, argv);
    return body(program);
  });
}

int program_main(int argc, char** argv, ProgramInfo info, const std::function<int(Program&)>& body) {
  return run_distributed_main([&](const LaunchEnv& env) {
    Program program(std::move(info), env, argc, argv);
    return body(program);
  });
}

}  // namespace workbook
