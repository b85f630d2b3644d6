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
// So glibc is told never to mmap() (every block comes from the heap, and a
// freed block is reused) and to keep up to 2 GiB of free heap, as a GPU
// caching allocator keeps its blocks. Measured there: 600-850 -> 1,700-2,000
// samples/s. Raising the mmap threshold instead stops at 32 MiB, and larger
// batches have larger activations (FashionCNN's first convolution at batch
// 512: 51 MB). glibc also gives each new thread its own arena, whose heaps are
// mmap()ed and at most 64 MiB: one arena for all threads keeps Chapter 2's
// replica threads, new every step, on the same reused heap. Measured there,
// FashionCNN inference at batch 4096: 4.8 s per forward with per-thread
// arenas and the mmap threshold, 0.48 s with these settings.
// Applied by every program (its entry point, program.cpp) and by the test runner; a no-op
// on C libraries other than glibc.
void tune_cpu_allocator();

}  // namespace workbook
