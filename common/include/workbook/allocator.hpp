// allocator.hpp — keeping glibc's malloc from handing memory back to the OS every step.
#pragma once

namespace workbook {

// Note: [CPU training and glibc malloc]
// A FashionCNN step at batch 100 allocates activations of about 10 MB each.
// By default glibc serves blocks that large with mmap() and returns them with
// munmap() when freed, so every step maps fresh pages and the kernel zeroes
// them on first touch: on the 2-core machine the workbook was measured on,
// over half of a step's time was system time. Worse, its threshold adapts:
// after evaluation frees 100 MB blocks, training ran 2-3x slower than before.
// Raising the mmap threshold to its maximum (32 MiB on 64-bit glibc) and the
// trim threshold keeps those blocks in the heap for reuse, as a GPU caching
// allocator does. Measured there: 600-850 -> 1,700-2,000 samples/s.
// Applied by every program (parse_train_flags) and by the test runner; a no-op
// on C libraries other than glibc.
void tune_cpu_allocator();

}  // namespace workbook
