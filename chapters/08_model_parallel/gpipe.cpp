// gpipe.cpp — ex8.6: the GPipe schedule.
#include "pipeline.hpp"
#include "workbook/errors.hpp"

namespace ch08 {

void gpipe(Stage& stage) {
  [[maybe_unused]] const int64_t m = stage.micro_batches();
  WB_NOT_IMPLEMENTED("ex8.6");  // TODO(ex8.6): your code here
}

}  // namespace ch08
