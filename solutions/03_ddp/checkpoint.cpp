// checkpoint.cpp — ex3.6: a checkpoint that a crash at any moment leaves whole.
#include "ddp.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "workbook/errors.hpp"

namespace ch03 {
namespace {

// Given: fsync. What the operating system still holds in memory goes to the
// disk, so that a power cut cannot undo it. Works on a file or a directory.
[[maybe_unused]] void sync_to_disk(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;  // best effort: some file systems cannot open a directory
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                     int64_t epochs_done, workbook::Communicator& comm) {
  // BEGIN SOLUTION ex3.6
  if (comm.rank() == 0) {
    // Every rank holds the same model and optimizer state: one writer is enough.
    torch::serialize::OutputArchive archive;
    model.save(archive);
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
    archive.write("epochs_done", torch::tensor(epochs_done, torch::kInt64));
    // Written beside the target (rename is atomic only within one file
    // system), then renamed over it: a reader sees the old file or the new
    // one, never a partial one.
    const std::filesystem::path temporary = path.string() + ".tmp." + std::to_string(getpid());
    try {
      archive.save_to(temporary.string());
      sync_to_disk(temporary);  // the bytes are on the disk before the name points at them
    } catch (const c10::Error& e) {
      std::filesystem::remove(temporary);
      throw workbook::UserError(fmt::format("cannot write checkpoint {}: {}", path.string(), e.what_without_backtrace()));
    }
    std::error_code error;
    std::filesystem::rename(temporary, path, error);
    if (error) {
      std::filesystem::remove(temporary);
      throw workbook::UserError(fmt::format("cannot replace checkpoint {}: {}", path.string(), error.message()));
    }
    sync_to_disk(path.parent_path().empty() ? "." : path.parent_path());  // and so is the new name
  }
  // Needed here: the other ranks may read the file as soon as this returns.
  comm.barrier();
  // END SOLUTION
}

int64_t load_checkpoint(const std::filesystem::path& path, torch::nn::Module& model,
                        torch::optim::Optimizer& optimizer) {
  // BEGIN SOLUTION ex3.6
  WB_CHECK(std::filesystem::exists(path), "checkpoint {} does not exist", path.string());
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path.string());
    model.load(archive);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor epochs_done;
    archive.read("epochs_done", epochs_done);
    return epochs_done.item<int64_t>();
  } catch (const c10::Error& e) {
    throw workbook::UserError(fmt::format("checkpoint {} is unreadable or is not a checkpoint of this model: {}",
                                          path.string(), e.what_without_backtrace()));
  }
  // END SOLUTION
}

}  // namespace ch03
