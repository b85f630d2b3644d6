// shared_directory.hpp — a temporary directory every rank of a test agrees on,
// for tests that write files (checkpoints) on one rank and read them on all.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include <torch/torch.h>

#include "workbook/communicator.hpp"

namespace mpi_test {

// Named by rank 0's process id, created by rank 0, removed by it at the end.
// Collective: every rank constructs it (and destroys it) in the same order.
struct SharedDirectory {
  std::filesystem::path path;
  workbook::Communicator& comm;
  explicit SharedDirectory(workbook::Communicator& c) : comm(c) {
    torch::Tensor id = torch::full({1}, static_cast<int64_t>(getpid()), torch::kInt64);
    comm.broadcast(id, 0);
    path = std::filesystem::temp_directory_path() / ("workbook-test-" + std::to_string(id.item<int64_t>()));
    if (comm.rank() == 0) std::filesystem::create_directories(path);
    comm.barrier();
  }
  ~SharedDirectory() {
    try {  // a destructor must not throw, even when a failed test left the ranks apart
      comm.barrier();
    } catch (const std::exception&) {
    }
    if (comm.rank() == 0) std::filesystem::remove_all(path);
  }
};

}  // namespace mpi_test
