// fashion_mnist.cpp — reading and validating the IDX files.
//
// IDX layout (big-endian): magic 0x00000803 (images) or 0x00000801 (labels),
// then one uint32 per dimension (count, rows, cols), then uint8 data.
#include "workbook/fashion_mnist.hpp"

#include <openssl/evp.h>
#include <zlib.h>

#include <vector>

#include <fmt/ranges.h>

#include "workbook/config.hpp"
#include "workbook/data_location.hpp"
#include "workbook/errors.hpp"

namespace fs = std::filesystem;

namespace workbook {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
constexpr int64_t kRows = 28, kCols = 28;
constexpr int64_t kClasses = 10;

uint32_t big_endian_u32(const std::vector<uint8_t>& bytes, size_t offset) {
  return (uint32_t{bytes[offset]} << 24) | (uint32_t{bytes[offset + 1]} << 16) |
         (uint32_t{bytes[offset + 2]} << 8) | uint32_t{bytes[offset + 3]};
}

// Checks the header and the payload length; returns the dimensions.
std::vector<int64_t> parse_header(const std::vector<uint8_t>& bytes, const fs::path& file, uint32_t magic,
                                  int dims) {
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  WB_CHECK(bytes.size() >= header, "{}: truncated: {} bytes, shorter than the {}-byte IDX header",
           file.string(), bytes.size(), header);
  uint32_t found = big_endian_u32(bytes, 0);
  WB_CHECK(found == magic, "{}: not an IDX {} file: magic number 0x{:08x}, expected 0x{:08x}", file.string(),
           dims == 3 ? "image" : "label", found, magic);
  std::vector<int64_t> shape;
  int64_t payload = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(big_endian_u32(bytes, 4 + 4 * d));
    // A corrupt header can promise more than any file holds: say so, without overflowing.
    WB_CHECK(!__builtin_mul_overflow(payload, shape.back(), &payload) && payload <= (int64_t{1} << 40),
             "{}: corrupt header: dimensions {} promise more data than any IDX file holds", file.string(),
             fmt::join(shape, " x "));
  }
  const size_t expected = header + static_cast<size_t>(payload);
  WB_CHECK(bytes.size() >= expected, "{}: truncated: {} bytes, the header promises {}", file.string(),
           bytes.size(), expected);
  WB_CHECK(bytes.size() == expected, "{}: {} unexpected trailing bytes after the data", file.string(),
           bytes.size() - expected);
  return shape;
}

}  // namespace

std::vector<uint8_t> read_decompressed(const fs::path& file) {
  WB_CHECK(path_exists(file), "{}: file not found (or not readable)", file.string());
  gzFile handle = gzopen(file.c_str(), "rb");
  WB_CHECK(handle != nullptr, "{}: cannot open for reading", file.string());
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  while (true) {
    int got = gzread(handle, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got < 0) {
      int code = 0;
      std::string reason = gzerror(handle, &code);
      gzclose(handle);
      throw UserError(fmt::format("{}: corrupt gzip data ({})", file.string(), reason));
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + got);
  }
  int code = 0;
  std::string reason = gzerror(handle, &code);
  gzclose(handle);
  // A gzip stream cut short reads to its end without error but sets Z_BUF_ERROR.
  WB_CHECK(code == Z_OK || code == Z_STREAM_END, "{}: truncated or corrupt gzip data ({})", file.string(), reason);
  return bytes;
}

void verify_data_checksum(const fs::path& file, const std::string& name, const std::string& actual) {
  for (const auto& entry : config::data_sha256) {
    if (entry.file == name) {
      WB_CHECK(actual == entry.sha256,
               "{}: checksum mismatch: the decompressed SHA-256 is {}, data/SHA256SUMS expects {} "
               "(a corrupt or different file; see data/README.md)",
               file.string(), actual, entry.sha256);
      return;
    }
  }
  WB_ASSERT(false, "no checksum for {} in data/SHA256SUMS", name);
}

std::string sha256_hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  WB_ASSERT(EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr) == 1, "EVP_Digest failed");
  std::string hex;
  for (unsigned i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

IdxImages read_idx_images(const fs::path& file) {
  std::vector<uint8_t> bytes = read_decompressed(file);
  std::vector<int64_t> shape = parse_header(bytes, file, kImagesMagic, 3);
  WB_CHECK(shape[1] == kRows && shape[2] == kCols, "{}: images are {}x{}, expected {}x{}", file.string(),
           shape[1], shape[2], kRows, kCols);
  torch::Tensor pixels = torch::empty({shape[0], kRows, kCols}, torch::kUInt8);
  std::memcpy(pixels.data_ptr(), bytes.data() + 16, static_cast<size_t>(pixels.numel()));
  return {pixels, sha256_hex(bytes.data(), bytes.size())};
}

IdxLabels read_idx_labels(const fs::path& file) {
  std::vector<uint8_t> bytes = read_decompressed(file);
  std::vector<int64_t> shape = parse_header(bytes, file, kLabelsMagic, 1);
  torch::Tensor labels = torch::empty({shape[0]}, torch::kUInt8);
  std::memcpy(labels.data_ptr(), bytes.data() + 8, static_cast<size_t>(labels.numel()));
  if (labels.numel() > 0) {
    int64_t largest = labels.max().item<int64_t>();
    WB_CHECK(largest < kClasses, "{}: label {} out of range 0..{}", file.string(), largest, kClasses - 1);
  }
  return {labels, sha256_hex(bytes.data(), bytes.size())};
}

namespace {

// "train-images-idx3-ubyte" or "train-images-idx3-ubyte.gz", whichever exists.
fs::path idx_file(const fs::path& directory, const std::string& name) {
  fs::path plain = directory / name;
  if (path_exists(plain)) return plain;
  fs::path gz = directory / (name + ".gz");
  WB_CHECK(path_exists(gz), "{}: missing (neither {} nor {}.gz is in {})", plain.string(), name, name,
           directory.string());
  return gz;
}


Dataset load_split(const fs::path& directory, const std::string& prefix, const LoadOptions& options,
                   int64_t keep) {
  const std::string images_name = prefix + "-images-idx3-ubyte";
  const std::string labels_name = prefix + "-labels-idx1-ubyte";
  fs::path images_file = idx_file(directory, images_name);
  IdxImages images = read_idx_images(images_file);
  fs::path labels_file = idx_file(directory, labels_name);
  IdxLabels labels = read_idx_labels(labels_file);
  if (options.verify_checksums) {
    verify_data_checksum(images_file, images_name, images.sha256);
    verify_data_checksum(labels_file, labels_name, labels.sha256);
  }
  const int64_t count = images.pixels.size(0);
  WB_CHECK(count == labels.labels.size(0), "{} holds {} images but {} holds {} labels", images_file.string(),
           count, labels_file.string(), labels.labels.size(0));
  WB_CHECK(keep <= count, "asked for {} {} samples, but {} holds only {}", keep, prefix == "t10k" ? "test" : prefix,
           images_file.string(), count);
  const int64_t n = keep < 0 ? count : keep;
  Dataset split;
  split.images = images.pixels.slice(0, 0, n).unsqueeze(1).to(torch::kFloat32).div_(255.0f).contiguous();
  split.labels = labels.labels.slice(0, 0, n).to(torch::kInt64).contiguous();
  return split;
}

}  // namespace

FashionMnist load_fashion_mnist(const fs::path& directory, const LoadOptions& options) {
  WB_CHECK(options.train_samples == -1 || options.train_samples > 0, "--train-samples must be positive, got {}",
           options.train_samples);
  WB_CHECK(options.test_samples == -1 || options.test_samples > 0, "--test-samples must be positive, got {}",
           options.test_samples);
  FashionMnist data;
  data.directory = directory;
  data.train = load_split(directory, "train", options, options.train_samples);
  data.test = load_split(directory, "t10k", options, options.test_samples);
  return data;
}

FashionMnist load_training_data(const std::optional<std::filesystem::path>& directory, int64_t train_samples,
                                const torch::Device& device, int64_t test_samples) {
  LoadOptions load;
  load.train_samples = train_samples;
  load.test_samples = test_samples;
  FashionMnist data = load_fashion_mnist(find_fashion_mnist(directory), load);
  for (Dataset* split : {&data.train, &data.test}) {
    split->images = split->images.to(device);
    split->labels = split->labels.to(device);
  }
  return data;
}

}  // namespace workbook
