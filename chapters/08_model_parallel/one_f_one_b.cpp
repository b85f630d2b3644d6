// one_f_one_b.cpp — ex8.7: the 1F1B schedule (PipeDream-Flush, as Megatron-LM
// runs it without interleaving).
#include <algorithm>

#include "pipeline.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

void one_f_one_b(Stage& stage) {
  [[maybe_unused]] const int64_t m = stage.micro_batches();
  WB_NOT_IMPLEMENTED("ex8.7");  // TODO(ex8.7): your code here
}

}  // namespace ch08
