# How the test programs are compiled. Their own code drives the library and checks results;
# the library they test is compiled as everything else is (-O3 in Release). Most of a test
# file's compile time is spent on the same third-party headers (GoogleTest, nlohmann-json,
# fmt, cpp-httplib) and, at -O3, on optimising test bodies that run once, in every one of
# CI's three from-scratch builds (Release, ASan, TSan). So: those headers precompiled once per
# test program, and the test code itself at -O1 in Release (the float64 references in the
# tests stay fast enough at -O1; the kernels they check are library code, still -O3).
# Measured on test_server's 15 files (2 cores, Release, no ccache): 203 CPU-s before, 112 after.
# The test programs other than test_server compile with the same flags, so they share one
# precompiled header (the first one's; each is ~130 MB); test_server's has its own defines
# (Asio's) and cpp-httplib.
function(tandem_test_build_settings target)
  if(TANDEM_PCH)
    get_property(owner GLOBAL PROPERTY TANDEM_TEST_PCH_OWNER)
    if(target STREQUAL "test_server")
      target_precompile_headers(${target} PRIVATE <gtest/gtest.h> <nlohmann/json.hpp> <fmt/format.h> <algorithm>
                                <cmath> <cstring> <filesystem> <fstream> <random> <string> <vector> <httplib.h>)
    elseif(owner)
      target_precompile_headers(${target} REUSE_FROM ${owner})
    else()
      target_precompile_headers(${target} PRIVATE <gtest/gtest.h> <nlohmann/json.hpp> <fmt/format.h> <algorithm>
                                <cmath> <cstring> <filesystem> <fstream> <random> <string> <vector>)
      set_property(GLOBAL PROPERTY TANDEM_TEST_PCH_OWNER ${target})
    endif()
  endif()
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-O1>)
endfunction()
