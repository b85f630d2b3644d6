// Tests for ex3.6: checkpoints written by rank 0, atomically, visible to
// every rank when save returns; resuming gives bit-identical weights.
#include "catch2_compat.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ddp.hpp"
#include "mpi_test.hpp"
#include "oracles.hpp"
#include "shared_directory.hpp"
#include "workbook/errors.hpp"

namespace fs = std::filesystem;

namespace {

bool same_state(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  auto ba = a.buffers(), bb = b.buffers();
  for (size_t i = 0; i < pa.size(); ++i)
    if (!torch::equal(pa[i], pb[i])) return false;
  for (size_t i = 0; i < ba.size(); ++i)
    if (!torch::equal(ba[i], bb[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("ex3.6 resuming from a checkpoint gives bit-identical weights", "[ex3.6]") {
  auto comm = mpi_test::communicator();
  mpi_test::SharedDirectory dir(*comm);
  const fs::path file = dir.path / "checkpoint.pt";
  const auto batches = oracle::random_batches(6, 8, 31);

  // Uninterrupted: 6 Adam steps.
  torch::manual_seed(1);
  auto straight = std::make_shared<workbook::TinyNet>(16, 0.0, true);
  torch::optim::Adam straight_optimizer(straight->parameters(), torch::optim::AdamOptions(1e-2));
  oracle::train_steps(*straight, straight_optimizer, batches, 0, 6);

  // Interrupted: 3 steps, a checkpoint, then a new process (here: new objects,
  // differently initialized) that loads it and takes the other 3.
  torch::manual_seed(1);
  auto first = std::make_shared<workbook::TinyNet>(16, 0.0, true);
  torch::optim::Adam first_optimizer(first->parameters(), torch::optim::AdamOptions(1e-2));
  oracle::train_steps(*first, first_optimizer, batches, 0, 3);
  ch03::save_checkpoint(file, *first, first_optimizer, /*epochs_done=*/3, *comm);

  torch::manual_seed(12345);
  auto resumed = std::make_shared<workbook::TinyNet>(16, 0.0, true);
  torch::optim::Adam resumed_optimizer(resumed->parameters(), torch::optim::AdamOptions(1e-2));
  INFO("every rank loads the checkpoint as soon as save_checkpoint returns: rank 0's file must be complete by "
       "then on every rank, and hold the epoch count");
  REQUIRE(ch03::load_checkpoint(file, *resumed, resumed_optimizer) == 3);
  INFO("after loading, the model (parameters and BatchNorm buffers) equals the one saved");
  REQUIRE(same_state(*resumed, *first));
  oracle::train_steps(*resumed, resumed_optimizer, batches, 3, 6);
  INFO("the resumed run must end bit-identical to the uninterrupted one: save Adam's state (its moments and step "
       "count) with the model, not the model alone");
  REQUIRE(same_state(*resumed, *straight));
}

TEST_CASE("ex3.6 rank 0 writes; every rank can read the file as soon as save returns", "[ex3.6][np3]") {
  auto comm = mpi_test::communicator();
  mpi_test::SharedDirectory dir(*comm);
  const fs::path file = dir.path / "visible.pt";
  // A large model takes rank 0 a while to write: a rank that does not wait
  // for it would look for the file too early.
  torch::manual_seed(2);
  auto model = std::make_shared<workbook::FashionCNN>();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  ch03::save_checkpoint(file, *model, optimizer, 1, *comm);
  const bool visible = fs::exists(file);
  INFO("save_checkpoint returned on a rank before rank 0's file was there: every rank may load it as soon as "
       "save_checkpoint returns");
  REQUIRE(mpi_test::all_ranks(visible));
  auto copy = std::make_shared<workbook::FashionCNN>();
  torch::optim::Adam copy_optimizer(copy->parameters(), torch::optim::AdamOptions(1e-3));
  REQUIRE(ch03::load_checkpoint(file, *copy, copy_optimizer) == 1);
  REQUIRE(mpi_test::all_ranks(same_state(*copy, *model)));
  INFO("the save left a file other than the checkpoint in its directory");
  int64_t entries = std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{});
  REQUIRE(entries == 1);
}

TEST_CASE("ex3.6 only rank 0 writes the checkpoint", "[ex3.6][np3]") {
  auto comm = mpi_test::communicator();
  mpi_test::SharedDirectory dir(*comm);
  // The other ranks get a path nobody can write to: a rank that writes fails.
  const fs::path file = comm->rank() == 0 ? dir.path / "one-writer.pt" : fs::path("/nonexistent/workbook/one-writer.pt");
  torch::manual_seed(4);
  auto model = std::make_shared<workbook::TinyNet>(16);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  bool wrote_elsewhere = false;
  try {
    ch03::save_checkpoint(file, *model, optimizer, 1, *comm);
  } catch (const workbook::NotImplemented&) {
    throw;  // the skeleton: every rank says so
  } catch (const std::exception&) {
    // Only a rank other than 0 can get here (rank 0's path is writable).
    // Release rank 0 if it waits for this rank in a barrier.
    wrote_elsewhere = true;
    comm->barrier();
  }
  INFO("ex3.6: a rank other than 0 wrote to the file system (its path is not writable): rank 0 alone writes the "
       "checkpoint");
  REQUIRE(mpi_test::all_ranks(!wrote_elsewhere));
  if (comm->rank() == 0) REQUIRE(fs::exists(file));
}

TEST_CASE("ex3.6 saving over a checkpoint never changes the old file's bytes", "[ex3.6]") {
  auto comm = mpi_test::communicator();
  mpi_test::SharedDirectory dir(*comm);
  const fs::path file = dir.path / "replaced.pt";
  const fs::path old_link = dir.path / "old-inode.pt";
  torch::manual_seed(3);
  auto model = std::make_shared<workbook::TinyNet>(16);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  ch03::save_checkpoint(file, *model, optimizer, 1, *comm);
  std::string old_bytes;
  if (comm->rank() == 0) {
    // A second name for the old file: if the new checkpoint's bytes are
    // written into it, this name shows them too.
    fs::create_hard_link(file, old_link);
    std::ifstream in(old_link, std::ios::binary);
    old_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  comm->barrier();
  oracle::train_steps(*model, optimizer, oracle::random_batches(1, 8, 31), 0, 1);
  ch03::save_checkpoint(file, *model, optimizer, 2, *comm);
  bool old_file_untouched = true;  // rank 0 looks; every rank learns the answer, and fails together
  if (comm->rank() == 0) {
    std::ifstream in(old_link, std::ios::binary);
    const std::string still(std::istreambuf_iterator<char>(in), {});
    struct stat a {}, b {};
    stat(file.c_str(), &a);
    stat(old_link.c_str(), &b);
    old_file_untouched = still == old_bytes && a.st_ino != b.st_ino;
  }
  INFO("the new checkpoint was written into the old file (its bytes changed under a second name for it): a "
       "crash in the middle of that write would leave neither the old checkpoint nor the new one");
  REQUIRE(mpi_test::all_ranks(old_file_untouched));
  auto loaded = std::make_shared<workbook::TinyNet>(16);
  torch::optim::SGD loaded_optimizer(loaded->parameters(), torch::optim::SGDOptions(0.1));
  REQUIRE(ch03::load_checkpoint(file, *loaded, loaded_optimizer) == 2);
}

TEST_CASE("ex3.6 a missing or corrupt checkpoint is a clear error", "[ex3.6]") {
  auto comm = mpi_test::communicator();
  mpi_test::SharedDirectory dir(*comm);
  auto model = std::make_shared<workbook::TinyNet>(16);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  REQUIRE_THROWS_AS(ch03::load_checkpoint(dir.path / "none.pt", *model, optimizer), workbook::UserError);
  const fs::path junk = dir.path / ("junk-" + std::to_string(comm->rank()) + ".pt");
  std::ofstream(junk) << "not a checkpoint";
  REQUIRE_THROWS_AS(ch03::load_checkpoint(junk, *model, optimizer), workbook::UserError);
}
