// commands_info.cpp — `workbook info`: this build and this machine, the
// first thing to ask for when a number looks wrong.
#include <fmt/format.h>

#include <thread>

#include "cli.hpp"
#include "commands.hpp"
#include "workbook/config.hpp"
#include "workbook/data_location.hpp"
#include "workbook/errors.hpp"
#include "workbook/gpu_info.hpp"

namespace workbook::cli {

int cmd_info() {
  const GpuRuntimeInfo gpu = gpu_runtime_info();
  fmt::print("workbook build   {}\n", build_dir().string());
  fmt::print("LibTorch         {}\n", config::torch_version);
  fmt::print("Python           {} (its torch runs the baselines)\n", config::python);
  fmt::print("cores            {}\n", std::thread::hardware_concurrency());
  fmt::print("MPI launcher     {}\n", config::mpiexec.empty() ? "not found" : std::string(config::mpiexec));
  if (gpu.built_with_nccl)
    fmt::print("CUDA runtime     {}\nNCCL             {}\nCUDA devices     {}{}\n", gpu.cuda_runtime, gpu.nccl,
               gpu.devices, gpu.note.empty() ? "" : " (" + gpu.note + ")");
  else
    fmt::print("CUDA, NCCL       {}\n", gpu.note);
  std::string data;
  try {
    data = find_fashion_mnist(std::nullopt).string();
  } catch (const UserError& e) {
    data = e.what();  // where it was looked for, and how to get it
  }
  fmt::print("Fashion-MNIST    {}\n", data);
  return 0;
}

}  // namespace workbook::cli
