// DeviceBuffer<T>: n elements of device memory, owned (freed on destruction, moved, never
// copied), with explicit host <-> device copies. What the kernels' callers allocate once
// (weights, KV, scratch); nothing on the hot path allocates.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"

namespace tandem::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t n) : n_(n) {
    if (n > 0) TANDEM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), static_cast<size_t>(n) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(static_cast<int64_t>(host.size())) { upload(host); }
  DeviceBuffer(const T* host, int64_t n) : DeviceBuffer(n) {
    if (n > 0) TANDEM_CUDA_CHECK(cudaMemcpy(data_, host, static_cast<size_t>(n) * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), n_(std::exchange(other.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(n_, other.n_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);  // a failure here has nowhere to go
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return n_; }

  void upload(const std::vector<T>& host) {
    TANDEM_CUDA_CHECK(cudaMemcpy(data_, host.data(), std::min(host.size(), static_cast<size_t>(n_)) * sizeof(T),
                                 cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(static_cast<size_t>(n_));
    if (n_ > 0) TANDEM_CUDA_CHECK(cudaMemcpy(host.data(), data_, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace tandem::cuda
