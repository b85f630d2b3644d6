// text_corpus.hpp — the text a small GPT trains on: the Jargon File, version
// 4.4.7 (public domain), as Debian's package jargon-text installs it
// (/usr/share/doc/jargon-text/jargon.txt.gz), read as bytes: a vocabulary of
// 256, no tokenizer. 1,681,817 bytes, checked against data/SHA256SUMS
// (data/README.md).
#pragma once
#include <filesystem>
#include <optional>

#include <torch/torch.h>

namespace workbook {

struct TextCorpus {
  torch::Tensor train;       // uint8 [N]: the text's first bytes
  torch::Tensor validation;  // uint8 [M]: its last bytes, never trained on
  std::filesystem::path file;
};

// The first of --data DIR (only it, when given), $WORKBOOK_DATA (only it,
// when set), ./data, the source tree's data/, /usr/share/doc/jargon-text that
// holds jargon.txt or jargon.txt.gz. A UserError lists the places searched
// and says how to get the file.
std::filesystem::path find_text_corpus(const std::optional<std::filesystem::path>& explicit_dir);

// The corpus at `file` (gzipped or not), its decompressed SHA-256 checked;
// the last `validation_share` of it (0 < share < 1) is the validation text.
// Every problem is a UserError naming the file.
TextCorpus load_text_corpus(const std::filesystem::path& file, double validation_share = 0.1,
                            bool verify_checksum = true);

// `rows` windows of `context + 1` consecutive bytes of `text`, at offsets
// drawn uniformly from `generator`: the inputs are a window's first
// `context` bytes, the targets its last `context` (each input byte's next
// byte). Both int64 [rows, context]. The text must be longer than context.
struct TextBatch {
  torch::Tensor inputs, targets;
};
TextBatch sample_windows(const torch::Tensor& text, int64_t rows, int64_t context, torch::Generator& generator);

}  // namespace workbook
