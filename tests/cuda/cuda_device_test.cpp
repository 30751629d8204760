// Device discovery and the bandwidth probe: without a device, find_cuda_device says why in
// the runtime's words (this part runs everywhere CUDA is built); with one, its figures are
// plausible and the probe measures a positive rate.
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/hbm_bandwidth.h"
#include "cuda/cuda_test_device.h"

namespace tandem {
namespace {

TEST(CudaDevice, FindsADeviceOrSaysWhyNot) {
  std::string why_not;
  const std::optional<cuda::CudaDeviceInfo> device = cuda::find_cuda_device(&why_not);
  if (device.has_value()) {
    EXPECT_FALSE(device->name.empty());
    EXPECT_GE(device->compute_major, 1);
    EXPECT_GT(device->total_bytes, 0);
    EXPECT_GT(device->multiprocessors, 0);
  } else {
    EXPECT_EQ(why_not.rfind("no CUDA device: ", 0), 0u) << why_not;
    EXPECT_GT(why_not.size(), std::string("no CUDA device: ").size()) << "the runtime's reason is missing";
  }
}

TEST(CudaDevice, BandwidthProbeMeasuresARate) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const cuda::HbmBandwidth bandwidth = cuda::measure_hbm_read_bandwidth(int64_t{256} << 20, 3);
  EXPECT_EQ(bandwidth.buffer_bytes, int64_t{256} << 20);
  EXPECT_GT(bandwidth.best_gb_per_s, 10.0);
  EXPECT_GE(bandwidth.best_gb_per_s, bandwidth.median_gb_per_s);
}

}  // namespace
}  // namespace tandem
#endif
