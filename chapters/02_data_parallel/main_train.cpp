// main_train.cpp — ch02_train: FashionCNN trained by naive DataParallel.
//
//   ch02_train [--replicas N] [--epochs 1] [--batch 100] [--lr 1e-3]
//              [--device cpu|cuda] [--threads N] [--train-samples N]
//              [--data DIR] [--json FILE]
//
// One process, N replicas: on the CPU, `cpu` N times with threads/N intra-op
// threads each; on CUDA, the GPUs (wrapping around when there are fewer).
// Prints a row per epoch, where each step's time went, and what each device
// holds; the last JSON line is the run's result.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data_parallel.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/fashion_mnist.hpp"
#include "workbook/memory.hpp"
#include "workbook/models.hpp"
#include "workbook/progress.hpp"
#include "workbook/results.hpp"
#include "workbook/timing.hpp"
#include "workbook/program.hpp"

namespace {

constexpr int64_t kWarmupSteps = 5;  // untimed steps at the start of the first epoch
constexpr int64_t kEvalBatch = 1000;

int64_t tensor_bytes(const torch::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

int64_t parameter_bytes(torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += tensor_bytes(p);
  return total;
}

// What DataParallel itself places on each device during one training step,
// counted from the tensors it holds: the replica's parameters, its chunk of
// the batch and its outputs; on the primary device also the original model,
// the gathered logits, the gradients and the optimizer's state. (Activations
// saved for backward scale with each replica's chunk and are left out: they
// are the same on every device.) On CUDA the allocator's peak per GPU is
// printed too.
// The step runs on a copy of the model with its own optimizer: training is
// not disturbed.
void report_memory(workbook::Classifier& trained, double lr, const torch::Tensor& images, const torch::Tensor& labels,
                   const std::vector<torch::Device>& devices, int threads_per_replica, workbook::JsonLines& json) {
  workbook::ClassifierPtr copy = trained.fresh();
  copy->to(devices[0]);
  workbook::copy_state(trained, *copy);
  workbook::Classifier& model = *copy;
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(lr));
  std::vector<torch::Tensor> chunks = ch02::scatter(images, devices);
  std::vector<workbook::ClassifierPtr> replicas = ch02::replicate(model, devices);
  std::vector<torch::Tensor> outputs = ch02::parallel_apply(replicas, chunks, devices, threads_per_replica);
  torch::Tensor logits = ch02::gather(outputs, devices[0]);
  logits.retain_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits, labels);
  loss.backward();
  optimizer.step();

  int64_t grads = 0, optimizer_state = 0;
  for (const auto& p : model.parameters()) grads += tensor_bytes(p.grad());
  for (const auto& [key, state] : optimizer.state()) {
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state.get()))
      optimizer_state += tensor_bytes(adam->exp_avg()) + tensor_bytes(adam->exp_avg_sq());
  }
  const int64_t original = parameter_bytes(model);
  const int64_t gathered = tensor_bytes(logits) + tensor_bytes(logits.grad());

  fmt::print("\nmemory held per device in one step (batch {}, {} replicas), counted from the tensors:\n",
             images.size(0), devices.size());
  workbook::Table table({{"device", 6}, {"name", 7}, {"replica_params", 14}, {"chunk+output", 12},
                         {"original", 10}, {"gathered", 9}, {"gradients", 10}, {"optim_state", 11},
                         {"total", 10}, {"alloc_peak", 10}});
  fmt::print("{}\n", table.header());
  for (size_t i = 0; i < devices.size(); ++i) {
    const bool primary = i == 0;
    const int64_t replica = parameter_bytes(*replicas[i]);
    const int64_t data = tensor_bytes(chunks[i]) + tensor_bytes(outputs[i]);
    const int64_t total = replica + data + (primary ? original + gathered + grads + optimizer_state : 0);
    const std::string peak = devices[i].is_cuda() ? workbook::format_bytes(workbook::peak_memory_bytes(devices[i])) : "-";
    auto cell = [&](int64_t bytes) { return workbook::format_bytes(bytes); };
    fmt::print("{}\n", table.row({fmt::format("{}", i), devices[i].str(), cell(replica), cell(data),
                                  cell(primary ? original : 0), cell(primary ? gathered : 0),
                                  cell(primary ? grads : 0), cell(primary ? optimizer_state : 0), cell(total), peak}));
    json.write({{"type", "memory"}, {"chapter", "ch02"}, {"replica", i}, {"device", devices[i].str()},
                {"replica_param_bytes", replica}, {"data_bytes", data}, {"primary_bytes", total - replica - data},
                {"total_bytes", total}});
  }
  fmt::print("\n");
}

int train(workbook::Program& program) {
  int replicas = 2;
  program.cli().add_option("--replicas", replicas, "replicas: on CPU they share the cores; on CUDA one per GPU, wrapping around")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  const workbook::TrainFlags& flags = program.parse();
  const torch::Device device = program.device();
  const std::vector<torch::Device> devices = workbook::replica_devices(device, replicas);
  const int threads_per_replica = workbook::threads_per_replica(flags.threads, replicas);
  WB_CHECK(flags.batch >= replicas, "--batch {} is smaller than --replicas {}: every replica needs a sample",
           flags.batch, replicas);
  torch::manual_seed(flags.seed);
  const torch::Device primary = devices[0];
  const workbook::FashionMnist data = workbook::load_training_data(flags.data, flags.train_samples, primary, flags.test_samples);  // all of it on the primary

  auto model = std::make_shared<workbook::FashionCNN>();
  model->to(primary);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(flags.lr));
  workbook::JsonLines& json = program.json();

  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(d.str());
  fmt::print("ch02_train: FashionCNN, {} train / {} test samples, batch {} over {} replicas [{}], "
             "{} thread(s) per replica, Adam lr {}\n",
             data.train.size(), data.test.size(), flags.batch, replicas, fmt::join(names, " "), threads_per_replica,
             flags.lr);
  workbook::Table table({{"epoch", 5}, {"train_loss", 10}, {"test_acc", 8}, {"epoch_s", 8}, {"samples/s", 10},
                         {"scatter", 7}, {"replicate", 9}, {"forward", 7}, {"gather", 6}, {"backward", 8},
                         {"optim", 6}});
  const int64_t num_samples = data.train.size();
  const int64_t steps_per_epoch = (num_samples + flags.batch - 1) / flags.batch;
  WB_CHECK(num_samples % flags.batch == 0 || num_samples % flags.batch >= replicas,
           "the last batch of an epoch would hold {} samples, fewer than --replicas {}: choose another --batch",
           num_samples % flags.batch, replicas);

  const int64_t first_batch = std::min(flags.batch, num_samples);
  report_memory(*model, flags.lr, data.train.images.narrow(0, 0, first_batch),
                data.train.labels.narrow(0, 0, first_batch), devices, threads_per_replica, json);

  double epoch_seconds_sum = 0.0;
  ch02::StepTimes times;  // summed over the timed steps of every epoch
  int64_t timed_samples = 0;
  double test_accuracy = 0.0;
  int64_t test_correct = 0;
  fmt::print("{}\n", table.header());
  for (int epoch = 1; epoch <= flags.epochs; ++epoch) {
    torch::Tensor order = torch::randperm(num_samples, torch::Generator(at::detail::createCPUGenerator(flags.seed + epoch)),
                                          torch::kInt64).to(primary);
    workbook::ProgressBar bar(fmt::format("epoch {}", epoch), steps_per_epoch, workbook::stdout_is_terminal());
    const double started = workbook::now_seconds();
    double loss_sum = 0.0;
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      const int64_t begin = step * flags.batch, size = std::min(flags.batch, num_samples - begin);
      const torch::Tensor index = order.narrow(0, begin, size);
      const torch::Tensor images = data.train.images.index_select(0, index);
      const torch::Tensor labels = data.train.labels.index_select(0, index);
      const bool timed = epoch > 1 || step >= kWarmupSteps;
      torch::Tensor loss = ch02::data_parallel_step(*model, optimizer, images, labels, devices, threads_per_replica,
                                                    timed ? &times : nullptr);
      if (timed) timed_samples += size;
      loss_sum += loss.item<double>() * static_cast<double>(size);
      bar.update(step + 1);
    }
    workbook::synchronize(devices);
    const double epoch_seconds = workbook::now_seconds() - started;
    bar.finish();
    epoch_seconds_sum += epoch_seconds;

    // Exact evaluation through DataParallel too: every test sample once, eval
    // mode (running statistics), no autograd graph.
    {
      torch::NoGradGuard no_grad;
      model->eval();
      test_correct = 0;
      for (int64_t begin = 0; begin < data.test.size(); begin += kEvalBatch) {
        const int64_t size = std::min(kEvalBatch, data.test.size() - begin);
        torch::Tensor logits = ch02::data_parallel_forward(*model, data.test.images.narrow(0, begin, size), devices,
                                                           threads_per_replica);
        test_correct += logits.argmax(1).eq(data.test.labels.narrow(0, begin, size)).sum().item<int64_t>();
      }
      model->train();
      test_accuracy = static_cast<double>(test_correct) / static_cast<double>(data.test.size());
    }
    const double total = times.total();
    auto share = [&](double seconds) { return fmt::format("{:.0f}%", total > 0 ? 100.0 * seconds / total : 0.0); };
    const double samples_per_s = total > 0 ? static_cast<double>(timed_samples) / total : 0.0;
    fmt::print("{}\n", table.row({fmt::format("{}", epoch), fmt::format("{:.4f}", loss_sum / num_samples),
                                  fmt::format("{:.4f}", test_accuracy), fmt::format("{:.2f}", epoch_seconds),
                                  fmt::format("{:.1f}", samples_per_s), share(times.scatter_s),
                                  share(times.replicate_s), share(times.forward_s), share(times.gather_s),
                                  share(times.backward_s), share(times.optimizer_s)}));
    std::fflush(stdout);
    json.write({{"type", "epoch"}, {"chapter", "ch02"}, {"epoch", epoch}, {"train_loss", loss_sum / num_samples},
                {"test_accuracy", test_accuracy}, {"epoch_s", epoch_seconds}, {"samples_per_s", samples_per_s}});
  }

  const double total = times.total();
  const double samples_per_s = total > 0 ? static_cast<double>(timed_samples) / total : 0.0;
  workbook::RunResult result;
  result.config = "DataParallel";
  result.epochs = flags.epochs;
  result.batch = flags.batch;
  result.train_samples = num_samples;
  result.test_accuracy = test_accuracy;
  result.test_correct = test_correct;
  result.samples_per_s = samples_per_s;
  result.epoch_s = epoch_seconds_sum / flags.epochs;
  result.peak_mem_bytes = workbook::peak_memory_bytes(primary);
  const double replicate_share = total > 0 ? times.replicate_s / total : 0.0;
  result.details = {{"devices", replicas},
                    {"threads_per_replica", threads_per_replica},
                    {"replicate_share", replicate_share},
                    {"step_phases_s",
                     {{"scatter", times.scatter_s}, {"replicate", times.replicate_s}, {"forward", times.forward_s},
                      {"gather", times.gather_s}, {"backward", times.backward_s}, {"optimizer", times.optimizer_s}}}};
  result.summary = fmt::format("result: test accuracy {:.4f} ({}/{}), {:.1f} samples/s, {:.2f} s/epoch, replicate "
                               "{:.1f}% of a step, peak memory {}",
                               test_accuracy, test_correct, data.test.size(), samples_per_s, result.epoch_s,
                               100.0 * replicate_share, workbook::format_bytes(result.peak_mem_bytes));
  program.finish(result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return workbook::single_process_main(
      argc, argv, {"ch02_train", "Chapter 2: train FashionCNN with naive DataParallel (one process, N replicas)"},
      train);
}
