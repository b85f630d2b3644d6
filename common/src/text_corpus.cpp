// text_corpus.cpp — finding, checking and sampling the GPT's text.
#include "workbook/text_corpus.hpp"

#include <cstring>

#include "workbook/config.hpp"
#include "workbook/data_location.hpp"
#include "workbook/errors.hpp"
#include "workbook/fashion_mnist.hpp"  // read_decompressed, verify_data_checksum

namespace fs = std::filesystem;

namespace workbook {

fs::path find_text_corpus(const std::optional<fs::path>& explicit_dir) {
  std::string searched;
  for (const DataCandidate& candidate :
       data_search_path(explicit_dir, {fs::path("/usr/share/doc/jargon-text"), "Debian's jargon-text"})) {
    for (const char* name : {"jargon.txt", "jargon.txt.gz"})
      if (path_exists(candidate.directory / name)) return candidate.directory / name;
    searched += fmt::format("\n  {} ({})", candidate.directory.string(), candidate.source);
  }
  throw UserError(fmt::format(
      "the text corpus was not found; looked for jargon.txt(.gz) in:{}\n"
      "Install it with `apt-get install jargon-text`, or pass --data DIR (see data/README.md).",
      searched));
}

TextCorpus load_text_corpus(const fs::path& file, double validation_share, bool verify_checksum) {
  WB_CHECK(validation_share > 0.0 && validation_share < 1.0, "the validation share is {}; it must lie in (0, 1)",
           validation_share);
  const std::vector<uint8_t> bytes = read_decompressed(file);
  if (verify_checksum) verify_data_checksum(file, "jargon.txt", sha256_hex(bytes.data(), bytes.size()));
  const auto total = static_cast<int64_t>(bytes.size());
  const auto held_out = static_cast<int64_t>(static_cast<double>(total) * validation_share);
  WB_CHECK(held_out >= 2 && total - held_out >= 2, "{}: {} bytes are too few to split into training and validation",
           file.string(), total);
  torch::Tensor text = torch::empty({total}, torch::kUInt8);
  std::memcpy(text.data_ptr(), bytes.data(), bytes.size());
  return {text.narrow(0, 0, total - held_out).clone(), text.narrow(0, total - held_out, held_out).clone(), file};
}

TextBatch sample_windows(const torch::Tensor& text, int64_t rows, int64_t context, torch::Generator& generator) {
  WB_CHECK(text.dim() == 1 && text.numel() > context && context >= 1 && rows >= 1,
           "sample_windows: {} windows of {} + 1 bytes do not fit a text of {} bytes", rows, context, text.numel());
  const torch::Tensor starts =
      torch::randint(0, text.numel() - context, {rows, 1}, generator, torch::TensorOptions().dtype(torch::kInt64));
  const torch::Tensor positions = starts + torch::arange(context + 1, torch::kInt64);  // [rows, context + 1]
  const torch::Tensor windows = text.index({positions}).to(torch::kInt64);
  return {windows.narrow(1, 0, context).contiguous(), windows.narrow(1, 1, context).contiguous()};
}

}  // namespace workbook
