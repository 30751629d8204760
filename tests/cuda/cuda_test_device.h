// The CUDA tests' guard: the device they run on, or a skip that says why there is none
// (a build without CUDA, or no device / driver, in the runtime's words).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/cuda_device.h"

// In a TEST body: skips the test unless device 0 is usable.
#define TANDEM_REQUIRE_CUDA_DEVICE()                                                                    \
  do {                                                                                                  \
    std::string tandem_why_not;                                                                         \
    if (!::tandem::cuda::find_cuda_device(&tandem_why_not).has_value()) GTEST_SKIP() << tandem_why_not; \
  } while (0)
