// device.cpp — devices, CPU threads and the terminal (device.hpp).
#include "workbook/device.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <fmt/ranges.h>

#include "workbook/errors.hpp"

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
  // Note: [OpenBLAS's own threads] OpenBLAS (Debian's libopenblas0-pthread)
  // keeps a thread pool of its own, sized when it loads from the cores this
  // process may use, and LibTorch 1.13's set_num_threads leaves it alone. A
  // rank bound to one core then multiplies matrices with 1 thread, an
  // unbound one (the emulated cluster's, a job's under srun) with one per
  // core: more threads than --threads asked for, and a product split
  // differently sums in another order, so the weights depended on how the
  // ranks were bound. Looked up at run time: another BLAS has no such symbol.
  using SetBlasThreads = void (*)(int);
  if (auto* set_blas_threads = reinterpret_cast<SetBlasThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set_blas_threads(threads);
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

bool stdout_is_terminal() { return isatty(fileno(stdout)) != 0; }

}  // namespace workbook
