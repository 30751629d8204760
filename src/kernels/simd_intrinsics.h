// <immintrin.h> for the SIMD kernels, minus GCC 12's false "uninitialized" warnings about its
// own headers. Include this instead of <immintrin.h>, and before any header that includes it.
//
// Why: GCC 12's intrinsic headers write _mm512_undefined_ps() and friends as `__m512 __Y = __Y;`
// (a deliberately undefined pass-through operand); once inlined at -O2/-O3, -Wuninitialized and
// -Wmaybe-uninitialized report `__Y` at the header's lines (GCC bug 105593, fixed in GCC 13).
// The pragma covers only the lines of the intrinsic headers, so our own code keeps both
// warnings — except where one of our variables is first read inside an intrinsic; clang
// (the fuzz build) and the Debug build still check those.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
