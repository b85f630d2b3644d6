// Devices, threads, memory, tables and JSON lines.
#include "catch2_compat.hpp"

#include <filesystem>
#include <fstream>

#include "workbook/device.hpp"
#include "workbook/errors.hpp"
#include "workbook/memory.hpp"
#include "workbook/results.hpp"

using Catch::Matchers::ContainsSubstring;

TEST_CASE("parse_device accepts cpu and explains a missing GPU", "[runtime]") {
  REQUIRE(workbook::parse_device("cpu") == torch::Device(torch::kCPU));
  REQUIRE_THROWS_WITH(workbook::parse_device("gpu"), ContainsSubstring("--device must be cpu, cuda or cuda:N"));
  if (!torch::cuda::is_available()) {
    REQUIRE_THROWS_WITH(workbook::parse_device("cuda"), ContainsSubstring("no CUDA device"));
  }
}

TEST_CASE("threads and peak memory are read from the system", "[runtime]") {
  REQUIRE(workbook::available_cores() >= 1);
  workbook::set_threads(1);
  REQUIRE(torch::get_num_threads() == 1);
  workbook::set_threads(workbook::available_cores());
  REQUIRE(torch::get_num_threads() == workbook::available_cores());
  REQUIRE_THROWS_AS(workbook::set_threads(0), workbook::UserError);

  const int64_t before = workbook::peak_memory_bytes(torch::kCPU);
  REQUIRE(before > 0);
  // A tensor larger than the whole peak so far, touched, must raise the peak above it.
  const int64_t bytes = before + (256 << 20);
  torch::Tensor big = torch::ones({bytes / 4}, torch::kFloat32);
  REQUIRE(workbook::peak_memory_bytes(torch::kCPU) >= bytes);
  REQUIRE(workbook::format_bytes(3 * 1024 * 1024 / 2) == "1.5 MiB");
}

TEST_CASE("tables have fixed columns and JSON lines are one object per line", "[runtime]") {
  workbook::Table table({{"size", 6}, {"time", 8}});
  REQUIRE(table.header() == "   size     time");
  REQUIRE(table.row({"4096", "1.25"}) == "   4096     1.25");

  const auto path = std::filesystem::temp_directory_path() / "workbook-test.jsonl";
  {
    workbook::JsonLines json(path);
    json.write({{"a", 1}});
    json.write({{"type", "result"}});
  }
  std::ifstream in(path);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  REQUIRE(nlohmann::json::parse(first)["a"] == 1);
  REQUIRE(nlohmann::json::parse(second)["type"] == "result");
  std::filesystem::remove(path);
  REQUIRE_THROWS_AS(workbook::JsonLines(std::filesystem::path("/nonexistent/dir/x.jsonl")), workbook::UserError);
}
