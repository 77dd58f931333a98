// Shared-memory layouts that the kernels and the host-side layout checks (kernels/checks/) share: plain functions
// of integers, compiled for the device by the kernels and for the host by the checks.
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define KDT_HD __host__ __device__ __forceinline__
#else
#define KDT_HD inline
#endif

namespace kdt {

// Byte offset of 16-byte chunk ch (0..3) of 64-byte row r in rows stored two per 128-byte line, XOR-swizzled by the
// line, so that the eight rows an ldmatrix reads fall on eight different bank groups.
KDT_HD uint32_t line_pair_offset(int r, int ch) {
  return (r >> 1) * 128 + ((((r & 1) * 4 + ch) ^ ((r >> 1) & 7)) << 4);
}

}  // namespace kdt
