// replicas.cpp — ex3.3: which tensors are not the same on every rank.
#include "ddp.hpp"

#include "workbook/errors.hpp"

namespace ch03 {

std::vector<std::string> replicas_disagree(torch::nn::Module& model, workbook::Communicator& comm) {
  // BEGIN SOLUTION ex3.3
  std::vector<std::string> names;
  std::vector<int64_t> hashes;
  auto fingerprint = [&](const std::string& name, const torch::Tensor& tensor) {
    // The bytes, not the values: a sum or a norm misses two swapped elements,
    // a sign of zero, and calls a NaN different from itself.
    // 64 bits: two different tensors share a hash once in 2^64 pairs, and
    // every rank runs the same build, so the same bytes hash alike.
    // (std::hash<std::string_view> is declared by <string>, which ddp.hpp includes.)
    const torch::Tensor bytes = tensor.detach().to(torch::kCPU).contiguous();
    const std::string_view view(static_cast<const char*>(bytes.data_ptr()), bytes.nbytes());
    names.push_back(name);
    hashes.push_back(static_cast<int64_t>(std::hash<std::string_view>{}(view)));
  };
  for (const auto& item : model.named_parameters()) fingerprint(item.key(), item.value());
  for (const auto& item : model.named_buffers()) fingerprint(item.key(), item.value());
  const auto n = static_cast<int64_t>(names.size());
  if (n == 0) return {};
  // Note: [largest and smallest in one call] The largest hash over ranks
  // equals the smallest where every rank has the same. Max of ~h is ~(min of
  // h) (~h = -h - 1 reverses the order and, unlike -h, cannot overflow), so
  // one all-reduce of [h, ~h] gives both, 2 numbers a tensor whatever the
  // number of ranks (gathering every rank's hashes would be p of them), and
  // every rank reads the same answer from it.
  const torch::Tensor own = torch::tensor(hashes, torch::kInt64);
  torch::Tensor both = torch::cat({own, torch::bitwise_not(own)}).to(comm.device());
  comm.all_reduce(both, workbook::ReduceOp::Max);
  both = both.cpu();
  const torch::Tensor differ = both.narrow(0, 0, n).ne(torch::bitwise_not(both.narrow(0, n, n)));
  std::vector<std::string> disagree;
  const auto* flags = differ.data_ptr<bool>();
  for (int64_t i = 0; i < n; ++i)
    if (flags[i]) disagree.push_back(names[static_cast<size_t>(i)]);
  return disagree;
  // END SOLUTION
}

}  // namespace ch03
