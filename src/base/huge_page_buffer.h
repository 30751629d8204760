// HugePageBuffer: a large, zero-initialised, 2 MiB-aligned byte buffer that asks Linux for
// transparent huge pages. Streaming a gigabyte of weights per token through 4 KiB pages
// costs a TLB miss every page; 2 MiB pages make that 512 times rarer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem {

class HugePageBuffer {
 public:
  explicit HugePageBuffer(size_t n_bytes);
  ~HugePageBuffer();
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace tandem
