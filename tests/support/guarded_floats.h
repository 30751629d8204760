// Kernel inputs that end at a page the process may not touch: a kernel that reads (or
// writes) element n of an n-float row faults instead of passing unnoticed.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tandem {

// n floats ending exactly where an inaccessible page begins: touching element n faults.
class GuardedFloats {
 public:
  explicit GuardedFloats(int64_t n) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_bytes = (static_cast<size_t>(n) * sizeof(float) + page - 1) / page * page;
    bytes_ = data_bytes + page;
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) std::abort();
    base_ = static_cast<uint8_t*>(base);
    if (mprotect(base_ + data_bytes, page, PROT_NONE) != 0) std::abort();
    data_ = reinterpret_cast<float*>(base_ + data_bytes) - n;
  }
  explicit GuardedFloats(const std::vector<float>& values) : GuardedFloats(static_cast<int64_t>(values.size())) {
    std::memcpy(data_, values.data(), values.size() * sizeof(float));
  }
  ~GuardedFloats() { munmap(base_, bytes_); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;

  float* data() { return data_; }
  float operator[](int64_t i) const { return data_[i]; }

 private:
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
  float* data_ = nullptr;
};

}  // namespace tandem
