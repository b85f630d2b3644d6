// The Fashion-MNIST reader: every bad file is written here and its message checked.
#include "catch2_compat.hpp"
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "workbook/errors.hpp"
#include "workbook/fashion_mnist.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;

namespace {

std::vector<uint8_t> be32(uint32_t v) {
  return {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
}

// An IDX image file of `count` images of rows x cols, pixel = (i + r + c) % 256.
std::vector<uint8_t> idx_images(uint32_t count, uint32_t rows = 28, uint32_t cols = 28, uint32_t magic = 0x803) {
  std::vector<uint8_t> bytes;
  for (uint32_t v : {magic, count, rows, cols}) {
    auto b = be32(v);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c) bytes.push_back(uint8_t((i + r + c) % 256));
  return bytes;
}

std::vector<uint8_t> idx_labels(uint32_t count, uint32_t magic = 0x801) {
  std::vector<uint8_t> bytes;
  for (uint32_t v : {magic, count}) {
    auto b = be32(v);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  for (uint32_t i = 0; i < count; ++i) bytes.push_back(uint8_t(i % 10));
  return bytes;
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile out = gzopen(path.c_str(), "wb");
  gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(out);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/workbook-test-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const workbook::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("read_idx_images reads plain and gzipped files exactly", "[data]") {
  TempDir dir;
  write_file(dir.path / "a", idx_images(3));
  write_gz(dir.path / "b.gz", idx_images(3));
  for (const char* name : {"a", "b.gz"}) {
    workbook::IdxImages images = workbook::read_idx_images(dir.path / name);
    REQUIRE(images.pixels.sizes() == torch::IntArrayRef{3, 28, 28});
    REQUIRE(images.pixels[2][1][5].item<int>() == (2 + 1 + 5));
    REQUIRE(images.sha256 == workbook::sha256_hex(idx_images(3).data(), idx_images(3).size()));
  }
}

TEST_CASE("each bad IDX file gives a message naming the file and the problem", "[data]") {
  TempDir dir;
  const fs::path f = dir.path / "images";

  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(dir.path / "nothing"); }),
               ContainsSubstring("nothing") && ContainsSubstring("not found"));

  auto truncated = idx_images(10);
  truncated.resize(truncated.size() - 100);
  write_file(f, truncated);
  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(f); }), ContainsSubstring(f.string()) && ContainsSubstring("truncated"));

  write_file(f, {0, 0, 8});
  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(f); }), ContainsSubstring("truncated") && ContainsSubstring("header"));

  write_file(f, idx_images(2, 28, 28, 0x801));
  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(f); }), ContainsSubstring("magic number"));

  write_file(f, idx_images(2, 32, 32));
  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(f); }), ContainsSubstring("32x32"));

  // A header promising 4 billion images: an error, not an overflow or an allocation.
  auto huge = idx_images(0);
  huge[4] = huge[5] = huge[6] = huge[7] = 0xff;
  write_file(f, huge);
  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(f); }), ContainsSubstring("corrupt header"));

  auto trailing = idx_images(2);
  trailing.push_back(7);
  write_file(f, trailing);
  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(f); }), ContainsSubstring("trailing"));

  // A gzip stream cut in the middle.
  const fs::path gz = dir.path / "images.gz";
  write_gz(gz, idx_images(50));
  fs::resize_file(gz, fs::file_size(gz) / 2);
  REQUIRE_THAT(error_of([&] { workbook::read_idx_images(gz); }), ContainsSubstring(gz.string()) && ContainsSubstring("gzip"));

  auto labels = idx_labels(5);
  labels.back() = 12;
  write_file(dir.path / "labels", labels);
  REQUIRE_THAT(error_of([&] { workbook::read_idx_labels(dir.path / "labels"); }), ContainsSubstring("label 12 out of range"));
}

TEST_CASE("load_fashion_mnist checks counts and checksums", "[data]") {
  TempDir dir;
  write_gz(dir.path / "train-images-idx3-ubyte.gz", idx_images(20));
  write_gz(dir.path / "train-labels-idx1-ubyte.gz", idx_labels(20));
  write_file(dir.path / "t10k-images-idx3-ubyte", idx_images(4));
  write_file(dir.path / "t10k-labels-idx1-ubyte", idx_labels(5));

  workbook::LoadOptions unchecked;
  unchecked.verify_checksums = false;
  REQUIRE_THAT(error_of([&] { workbook::load_fashion_mnist(dir.path, unchecked); }),
               ContainsSubstring("4 images") && ContainsSubstring("5 labels"));

  write_file(dir.path / "t10k-labels-idx1-ubyte", idx_labels(4));
  workbook::FashionMnist data = workbook::load_fashion_mnist(dir.path, unchecked);
  REQUIRE(data.train.images.sizes() == torch::IntArrayRef{20, 1, 28, 28});
  REQUIRE(data.train.images.dtype() == torch::kFloat32);
  REQUIRE(data.train.images[3][0][2][4].item<float>() == Approx((3 + 2 + 4) / 255.0f));
  REQUIRE(data.train.labels[13].item<int64_t>() == 3);
  REQUIRE(data.test.size() == 4);

  unchecked.train_samples = 7;
  REQUIRE(workbook::load_fashion_mnist(dir.path, unchecked).train.size() == 7);

  INFO("well-formed files that are not the official ones fail the checksum");
  REQUIRE_THAT(error_of([&] { workbook::load_fashion_mnist(dir.path); }),
               ContainsSubstring("train-images-idx3-ubyte.gz") && ContainsSubstring("checksum mismatch"));

  fs::remove(dir.path / "t10k-images-idx3-ubyte");
  REQUIRE_THAT(error_of([&] { workbook::load_fashion_mnist(dir.path, unchecked); }),
               ContainsSubstring("t10k-images-idx3-ubyte") && ContainsSubstring("missing"));
}

TEST_CASE("find_fashion_mnist names every place it looked", "[data]") {
  TempDir dir;
  REQUIRE_THAT(error_of([&] { workbook::find_fashion_mnist(dir.path / "nowhere"); }),
               ContainsSubstring("nowhere") && ContainsSubstring("--data"));
}

TEST_CASE("the installed Fashion-MNIST loads with verified checksums", "[data]") {
  workbook::FashionMnist data = workbook::load_fashion_mnist(workbook::find_fashion_mnist(std::nullopt));
  REQUIRE(data.train.size() == 60000);
  REQUIRE(data.test.size() == 10000);
  INFO("Fashion-MNIST is balanced: 6,000 training images per class");
  REQUIRE(torch::equal(torch::bincount(data.train.labels), torch::full({10}, 6000, torch::kInt64)));
  REQUIRE(data.train.images.min().item<float>() == 0.0f);
  REQUIRE(data.train.images.max().item<float>() == 1.0f);
}
