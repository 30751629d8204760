// HugePageBuffer over an anonymous mmap, with MADV_HUGEPAGE before the first touch (the
// kernel's THP mode is often "madvise", where only advised ranges get huge pages).
#include "base/huge_page_buffer.h"

#include <sys/mman.h>

#include <new>

namespace tandem {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

HugePageBuffer::HugePageBuffer(size_t n_bytes) : size_(n_bytes) {
  if (n_bytes == 0) return;
  mapped_ = (n_bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* map = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  ::madvise(map, mapped_, MADV_HUGEPAGE);  // advice only: fine if refused
#endif
  data_ = static_cast<uint8_t*>(map);
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
}

}  // namespace tandem
