// data_location.cpp — the search for the data files (data/README.md).
#include "workbook/data_location.hpp"

#include <cstdlib>

#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace fs = std::filesystem;

namespace workbook {

bool path_exists(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

std::vector<DataCandidate> data_search_path(const std::optional<fs::path>& explicit_dir, const PackagePlace& package) {
  if (explicit_dir) return {{*explicit_dir, "--data"}};
  if (const char* env = std::getenv("WORKBOOK_DATA"); env != nullptr && *env != '\0')
    return {{fs::path(env), "$WORKBOOK_DATA"}};
  return {{fs::path("data"), "./data"},
          {fs::path(std::string(config::source_dir)) / "data", "the source tree"},
          {package.directory, package.name}};
}

fs::path find_fashion_mnist(const std::optional<fs::path>& explicit_dir) {
  std::string searched;
  for (const DataCandidate& candidate : data_search_path(explicit_dir)) {
    const fs::path& dir = candidate.directory;
    if (path_exists(dir / "train-images-idx3-ubyte") || path_exists(dir / "train-images-idx3-ubyte.gz")) return dir;
    searched += fmt::format("\n  {} ({})", dir.string(), candidate.source);
  }
  throw UserError(fmt::format(
      "Fashion-MNIST not found; looked for train-images-idx3-ubyte(.gz) in:{}\n"
      "Install it with `apt-get install dataset-fashion-mnist`, or pass --data DIR (see data/README.md).",
      searched));
}

}  // namespace workbook
