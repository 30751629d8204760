// tandem_cuda_matmul_bench: the device matmul kernels on tinyllama-1.1b's projection shapes,
// timed with CUDA events (bench/device-check runs it on the lent GPU). For each shape, weight
// layout and token count: the median of the timed launches, the weight bytes read per second
// (decode's figure of merit: HBM bandwidth) and the arithmetic rate (prefill's). The weights
// are rotated over enough copies to exceed the L2 cache, so every launch reads them from HBM.
// One JSON line per case on stdout.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/f16_mma_layout.h"
#include "backends/cuda/matmul.h"
#include "backends/cuda/matmul_f16_mma.h"
#include "base/quant.h"

namespace {

using tandem::DType;
namespace cuda = tandem::cuda;

struct Shape {
  const char* name;
  int64_t rows, cols;
};

constexpr int64_t kRotateBytes = int64_t{512} << 20;  // well past the H200's 60 MB of L2

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run() {
  const Shape shapes[] = {
      {"wq", 2048, 2048}, {"wk", 256, 2048}, {"gate", 5632, 2048}, {"down", 2048, 5632}, {"output", 32000, 2048}};
  const DType types[] = {DType::F16, DType::Q8_0, DType::Q4_0};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  cudaStream_t stream;
  TANDEM_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  TANDEM_CUDA_CHECK(cudaEventCreate(&start));
  TANDEM_CUDA_CHECK(cudaEventCreate(&stop));
  for (const Shape& shape : shapes) {
    std::vector<float> row_values(static_cast<size_t>(shape.cols));
    for (const DType type : types) {
      const int64_t row_bytes = tandem::dtype_row_bytes(type, shape.cols), bytes = row_bytes * shape.rows;
      std::vector<uint8_t> host(static_cast<size_t>(bytes));
      for (int64_t r = 0; r < shape.rows; ++r) {
        for (float& v : row_values) v = uniform(rng) * 0.05f;
        tandem::quantize_row(type, row_values.data(), host.data() + r * row_bytes, shape.cols);
      }
      // Layouts: the block format's rows (matmul), and for F16 the tensor-core tiles.
      std::vector<std::string> layouts = {"rows"};
      if ((type == DType::F16 && cuda::fits_f16_mma(shape.rows, shape.cols)) ||
          (type == DType::Q8_0 && cuda::fits_q8_0_mma(shape.rows, shape.cols)))
        layouts.push_back("mma");
      for (const std::string& layout : layouts) {
        std::vector<uint8_t> uploaded = host;
        if (layout == "mma" && type == DType::Q8_0)
          cuda::pack_q8_0_mma_weights(host.data(), shape.rows, shape.cols, uploaded.data());
        else if (layout == "mma")
          cuda::pack_f16_mma_weights(reinterpret_cast<const uint16_t*>(host.data()), shape.rows, shape.cols,
                                     reinterpret_cast<uint16_t*>(uploaded.data()));
        const int64_t copies = std::max<int64_t>(2, kRotateBytes / bytes);
        std::vector<cuda::DeviceBuffer<uint8_t>> weights;
        for (int64_t i = 0; i < copies; ++i) weights.emplace_back(uploaded);
        for (const int64_t n_tokens : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{512}}) {
          std::vector<float> x(static_cast<size_t>(n_tokens * shape.cols));
          for (float& v : x) v = uniform(rng);
          cuda::DeviceBuffer<float> x_device(x);
          cuda::DeviceBuffer<uint16_t> packed(cuda::f16_mma_activation_halves(n_tokens, shape.cols));
          cuda::DeviceBuffer<float> out(n_tokens * shape.rows);
          const auto launch = [&](int64_t copy) {
            const uint8_t* w = weights[static_cast<size_t>(copy % copies)].data();
            if (layout == "mma") {
              cuda::pack_activations_f16_mma(x_device.data(), n_tokens, shape.cols, packed.data(), stream);
              if (type == DType::Q8_0)
                cuda::matmul_q8_0_mma(w, shape.rows, shape.cols, packed.data(), n_tokens, out.data(), stream);
              else
                cuda::matmul_f16_mma(reinterpret_cast<const uint16_t*>(w), shape.rows, shape.cols, packed.data(),
                                     n_tokens, out.data(), stream);
            } else {
              cuda::matmul({w, type, shape.rows, shape.cols, row_bytes}, x_device.data(), n_tokens, out.data(), stream);
            }
          };
          for (int64_t i = 0; i < 3; ++i) launch(i);
          std::vector<double> seconds;
          const int reps = n_tokens >= 512 ? 10 : 30;
          for (int i = 0; i < reps; ++i) {
            TANDEM_CUDA_CHECK(cudaEventRecord(start, stream));
            launch(i + 3);
            TANDEM_CUDA_CHECK(cudaEventRecord(stop, stream));
            TANDEM_CUDA_CHECK(cudaEventSynchronize(stop));
            float ms = 0;
            TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
            seconds.push_back(ms / 1e3);
          }
          const double s = median(seconds);
          std::printf("%s\n",
                      fmt::format("{{\"shape\":\"{}\",\"rows\":{},\"cols\":{},\"type\":\"{}\",\"layout\":\"{}\","
                                  "\"tokens\":{},\"median_us\":{:.2f},\"weight_gb_per_s\":{:.1f},"
                                  "\"tflops\":{:.2f}}}",
                                  shape.name, shape.rows, shape.cols, tandem::dtype_name(type), layout, n_tokens,
                                  s * 1e6, static_cast<double>(bytes) / s / 1e9,
                                  2.0 * static_cast<double>(shape.rows * shape.cols * n_tokens) / s / 1e12)
                          .c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem_cuda_matmul_bench: %s\n", e.what());
    return 1;
  }
}
