// data_location.hpp — where Fashion-MNIST is looked for (no LibTorch needed,
// so the `workbook` CLI and the programs share one search).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace workbook {

struct DataCandidate {
  std::filesystem::path directory;
  std::string source;  // "--data", "$WORKBOOK_DATA", "./data", ...: why it is searched
};

// The places searched, in order: only `explicit_dir` (--data) when given, else
// only $WORKBOOK_DATA when set (a typo is an error, not a silent fallback),
// else ./data, <source>/data, then `package` (where a Debian package puts the
// files; by default Fashion-MNIST's, /usr/share/datasets/fashion-mnist).
struct PackagePlace {
  std::filesystem::path directory = "/usr/share/datasets/fashion-mnist";
  std::string name = "Debian's dataset-fashion-mnist";
};
std::vector<DataCandidate> data_search_path(const std::optional<std::filesystem::path>& explicit_dir,
                                            const PackagePlace& package = {});

// The first candidate that holds train-images-idx3-ubyte(.gz). A UserError
// lists every place searched and says how to get the data.
std::filesystem::path find_fashion_mnist(const std::optional<std::filesystem::path>& explicit_dir);

// fs::exists that answers false, instead of throwing, when a folder cannot be read.
bool path_exists(const std::filesystem::path& path);

}  // namespace workbook
