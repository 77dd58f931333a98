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

// The e4m3 configuration's tiles (mma_sync/verify_sm120_e4m3.cuh): key rows of 576 e4m3 bytes, 16-byte chunk c of
// row r at c ^ ((r >> 1) & 3) (even and odd rows fill the two halves of a 128-byte line, so 8 rows of an ldmatrix
// fall on 8 bank groups). kernels/checks/e4m3_layout.cpp decodes every ldmatrix of it against mma.sync m16n8k32.
namespace e4m3 {
constexpr int ROW = 576, KEYS = 32, TILE = KEYS * ROW;

KDT_HD uint32_t tile_offset(int r, int c) { return r * ROW + ((c ^ ((r >> 1) & 3)) << 4); }
// the row swizzle of the rows lane supplies to every ldmatrix below ((key >> 1) & 3 for all its keys)
KDT_HD int lane_swizzle(int lane) { return (lane >> 1) & 3; }
// QK, ldmatrix.x4: lane's row address for 32-dim step j (j & 1 chosen by `odd`, the rest added as 64 (j >> 1)) of the
// tile's first 16 keys (the second 16: + 16 ROW). Matrix lane >> 3 = mi: keys 8 (mi >> 1) + (lane & 7), chunk
// 2 j + (mi & 1); chunk 2 j + b at 64 (j >> 1) + 16 ((2 (j & 1) + b) ^ swizzle).
KDT_HD uint32_t k_frag_base(int lane, int odd) {
  const int mi = lane >> 3, key = 8 * (mi >> 1) + (lane & 7);
  return key * ROW + 16 * ((2 * odd + (mi & 1)) ^ lane_swizzle(lane));
}
// PV, ldmatrix.x4.trans: lane's row address for the 16-byte output chunk 4 pw + cc (matrix lane >> 3 = keys 8 i ..
// + 7): v_frag_row(lane, pw) + 16 (cc ^ swizzle).
KDT_HD uint32_t v_frag_row(int lane, int pw) { return (8 * (lane >> 3) + (lane & 7)) * ROW + 64 * pw; }
}  // namespace e4m3

}  // namespace kdt
