// runtime.cpp — devices, threads, clocks, memory and the progress bar.
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "workbook/allocator.hpp"
#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "workbook/communicator.hpp"
#include "workbook/progress.hpp"
#include "workbook/timing.hpp"

#ifdef WORKBOOK_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace workbook {

torch::Device parse_device(const std::string& name) {
  WB_CHECK(name == "cpu" || name.rfind("cuda", 0) == 0, "--device must be cpu, cuda or cuda:N, got '{}'", name);
  if (name == "cpu") return torch::kCPU;
  WB_CHECK(torch::cuda::is_available(),
           "--device {}: no CUDA device is available (this LibTorch {} CUDA); use --device cpu", name,
#ifdef WORKBOOK_TORCH_CUDA
           "was built with"
#else
           "was built without"
#endif
  );
  torch::Device device(torch::kCUDA);
  try {
    device = torch::Device(name);
  } catch (const c10::Error&) {
    throw UserError(fmt::format("--device '{}' is not a device name (cpu, cuda, cuda:N)", name));
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  WB_CHECK(!device.has_index() || device.index() < count, "--device {}: only {} CUDA device(s) here", name, count);
  if (!device.has_index()) device.set_index(0);
  return device;
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

void synchronize(const std::vector<torch::Device>& devices) {
  for (const torch::Device& device : devices) synchronize(device);
}

std::vector<torch::Device> replica_devices(const torch::Device& device, int count) {
  WB_CHECK(count >= 1, "--replicas must be at least 1, got {}", count);
  std::vector<torch::Device> devices;
  if (device.is_cpu()) return std::vector<torch::Device>(static_cast<size_t>(count), torch::kCPU);
  const int gpus = static_cast<int>(torch::cuda::device_count());
  WB_CHECK(gpus > 0, "no CUDA device is available for {} replicas", count);
  const int first = device.has_index() ? device.index() : 0;  // --device cuda:1: the primary is cuda:1
  for (int i = 0; i < count; ++i)
    devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>((first + i) % gpus));
  return devices;
}

void check_devices(const std::vector<torch::Device>& devices, const std::string& who) {
  WB_CHECK(!devices.empty(), "{}: the device list is empty", who);
  std::vector<std::string> names;
  for (const torch::Device& d : devices) names.push_back(d.str());
  for (const torch::Device& d : devices)
    WB_CHECK(d.type() == devices[0].type() && (d.is_cpu() || d.is_cuda()),
             "{}: mismatched devices [{}]: use all CPU or all CUDA devices", who, fmt::join(names, ", "));
  if (devices[0].is_cuda()) {
    const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
    for (const torch::Device& d : devices) {
      WB_CHECK(d.has_index(), "{}: device {} needs an index (cuda:0, cuda:1, ...)", who, d.str());
      WB_CHECK(d.index() < gpus, "{}: device {} is not there ({} CUDA device(s), indexed from 0)", who, d.str(), gpus);
    }
  }
}

int threads_per_replica(int threads, int replicas) { return std::max(1, threads / std::max(1, replicas)); }

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

void set_threads(int threads) {
  WB_CHECK(threads >= 1, "--threads must be at least 1, got {}", threads);
  // Note: LibTorch initializes a thread's OpenMP count lazily, on its first
  // parallel operation, from a process-wide value that any thread's
  // set_num_threads() changes (Chapter 2's replica threads do). Asking first
  // makes that initialization happen now, so it cannot undo this setting later.
  (void)torch::get_num_threads();
  torch::set_num_threads(threads);
  // Inter-op threads can be set once per process, before any parallel work.
  static bool interop_set = false;
  if (!interop_set) {
    try {
      torch::set_num_interop_threads(1);
    } catch (const c10::Error&) {
      // Already started: keep LibTorch's choice.
    }
    interop_set = true;
  }
}

void tune_cpu_allocator() {
#ifdef __GLIBC__
  constexpr int kTrimThreshold = std::numeric_limits<int>::max();  // give back only beyond 2 GiB of free heap
  constexpr int kTopPad = 64 << 20;                                 // grow the heap in 64 MiB steps
  mallopt(M_MMAP_MAX, 0);     // never mmap(): every block, however large, comes from the heap and is reused
  mallopt(M_ARENA_MAX, 1);    // one heap for every thread (Chapter 2's replica threads reuse its blocks too)
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  mallopt(M_TOP_PAD, kTopPad);
#endif
}

bool stdout_is_terminal() { return isatty(fileno(stdout)) != 0; }

Stopwatch::Stopwatch(torch::Device device) : device_(device) {
  if (device_.is_cuda() && built_with_cuda_runtime()) events_ = std::make_unique<CudaEventTimer>(device_.has_index() ? device_.index() : 0);
}

void Stopwatch::start() {
  synchronize(device_);
  if (events_) events_->start();
  begin_ = std::chrono::steady_clock::now();
}

double Stopwatch::stop() {
  if (events_) return seconds_ = events_->stop();
  synchronize(device_);
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
  return seconds_;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t peak_memory_bytes(const torch::Device& device) {
  if (device.is_cuda()) {
#ifdef WORKBOOK_TORCH_CUDA
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE)].peak;
#else
    return 0;
#endif
  }
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    std::getline(status, key);
  }
  return 0;
}

int64_t largest_peak_memory_bytes(Communicator& comm) {
  const torch::Tensor mine = torch::full({1}, peak_memory_bytes(comm.device()),
                                         torch::TensorOptions().dtype(torch::kInt64).device(comm.device()));
  return comm.all_gather(mine).max().item<int64_t>();
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), enabled_(enabled) {}

void ProgressBar::update(int64_t done, const std::string& suffix) {
  if (!enabled_) return;
  const double now = now_seconds();
  if (done < total_ && now - last_draw_ < 0.1) return;  // redraw at most 10 times a second
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  fmt::print("\r{} [{}] {:>3}% {}", label_, bar, 100 * done / total_, suffix);
  std::fflush(stdout);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    fmt::print("\r\033[2K");
    std::fflush(stdout);
  }
  drawn_ = false;
}

}  // namespace workbook
