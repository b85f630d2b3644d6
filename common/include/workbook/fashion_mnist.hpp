// fashion_mnist.hpp — Fashion-MNIST from IDX files (gzipped or not), validated:
// magic numbers, dimensions, counts, truncation and the SHA-256 of the contents.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "workbook/data_location.hpp"  // find_fashion_mnist

namespace workbook {

// One split of the dataset, in memory.
struct Dataset {
  torch::Tensor images;  // float32 [N, 1, 28, 28], pixel values scaled to [0, 1]
  torch::Tensor labels;  // int64 [N], class indices 0..9
  int64_t size() const { return labels.size(0); }
};

struct FashionMnist {
  Dataset train;  // 60,000 samples
  Dataset test;   // 10,000 samples
  std::filesystem::path directory;  // where the files were found
};

struct IdxImages {
  torch::Tensor pixels;  // uint8 [N, rows, cols]
  std::string sha256;    // of the decompressed bytes
};
struct IdxLabels {
  torch::Tensor labels;  // uint8 [N]
  std::string sha256;
};

// Readers of a single IDX file (".gz" or not: zlib reads both). Every problem
// (missing, truncated, wrong magic, wrong dimensions, trailing bytes) is a
// UserError whose message names the file and says what is wrong.
IdxImages read_idx_images(const std::filesystem::path& file);
IdxLabels read_idx_labels(const std::filesystem::path& file);

struct LoadOptions {
  int64_t train_samples = -1;   // keep the first N training samples (-1: all)
  int64_t test_samples = -1;    // keep the first N test samples (-1: all)
  bool verify_checksums = true; // compare with data/SHA256SUMS
};

// Loads and validates both splits: image and label counts must agree, labels
// must be 0..9, and each file's decompressed SHA-256 must match data/SHA256SUMS.
FashionMnist load_fashion_mnist(const std::filesystem::path& directory, const LoadOptions& options = {});

// The data a training program asked for: Fashion-MNIST found from `directory`
// (or the usual places), checked, cut to `train_samples` and `test_samples`
// (-1: all), and moved to `device`.
// Note: Fashion-MNIST is 188 MB as float32: it fits on any GPU, so the whole
// set moves there once and batches are gathered on the device. On the CPU
// the tensors already are where the model is.
FashionMnist load_training_data(const std::optional<std::filesystem::path>& directory, int64_t train_samples,
                                const torch::Device& device, int64_t test_samples = -1);

// The SHA-256 (hex) of a byte string; exposed for tests.
std::string sha256_hex(const void* data, size_t size);

// The bytes of `file`, decompressed when it is gzipped (zlib passes a plain
// file through). A missing, unreadable or corrupt file is a UserError naming it.
std::vector<uint8_t> read_decompressed(const std::filesystem::path& file);

// A UserError unless `actual` is the SHA-256 data/SHA256SUMS lists for `name`.
void verify_data_checksum(const std::filesystem::path& file, const std::string& name, const std::string& actual);

}  // namespace workbook
