// In a build without CUDA the device tests are not compiled; this one says so in the test
// log instead of the suite silently running fewer tests.
#include <gtest/gtest.h>

#if !defined(TANDEM_WITH_CUDA)
TEST(CudaKernels, SkippedInABuildWithoutCuda) { GTEST_SKIP() << "built without CUDA (TANDEM_CUDA=OFF or no nvcc)"; }
#endif
