// The shared-memory layout of the sm_120 third form's KV tile (verify_sm120_halves.cuh) and the ldmatrix addresses
// its warps read it with: one home for both, checked exhaustively on the host by kernels/checks/halves_layout.cpp
// (tests/test_kernel_layouts.py). A tile holds one CTA's slice of 32 keys: latent dims 256 r .. + 255 as rows of
// 512 B (the 16-byte chunks of each 128-byte group XOR-swizzled by key & 7), then rope dims 512 + 32 r .. + 31 as
// rows of 64 B, two per 128-byte line. "Local dim" below: 0..255 latent, 256..287 rope.
#pragma once
#include "../common/layout.cuh"

namespace kdt {
namespace halves {

constexpr int BN = 32;                 // keys per tile
constexpr int LAT_ROW = 512;           // bytes of a key's latent slice
constexpr int LAT = BN * LAT_ROW;      // 16,384
constexpr int TILE = LAT + BN * 64;    // 18,432

// Chunk c (0..31: local dims 8c .. 8c + 7) of key k's latent slice; chunk c (0..3: local dims 256 + 8c ..) of its
// rope slice.
KDT_HD uint32_t lat_offset(int k, int c) { return k * LAT_ROW + ((c >> 3) << 7) + (((c & 7) ^ (k & 7)) << 4); }
KDT_HD uint32_t rope_offset(int k, int c) { return LAT + line_pair_offset(k, c); }

// QK warp, B fragments (ldmatrix x4): lane l gives row l & 7 of matrix l >> 3 = mi; matrices mi = 2 nh + hi hold
// keys 16 kh + 8 nh + 0..7 at local dims (k16 step kk of dim half dh) + 8 hi. A latent step (kk < 8) is one
// lane-dependent base XOR-ed with (kk & 3) << 5 plus its 128-byte group; the rope step (kk = 8) is the key's rope
// chunk 2 dh + hi.
KDT_HD uint32_t k_base(int lane) {
  const int mi = lane >> 3, sw = lane & 7;
  return ((mi >> 1) * 8 + sw) * LAT_ROW + (((mi & 1) ^ (sw & 1)) << 4) + ((sw >> 1) << 5);
}
KDT_HD uint32_t k_step(uint32_t base, int kk, int kh, int dh) {
  return 16 * LAT_ROW * kh + (base ^ (uint32_t)((kk & 3) << 5)) + 128 * (2 * dh + (kk >> 2));
}
KDT_HD uint32_t rope_base(int lane, int dh) {
  const int mi = lane >> 3;
  return rope_offset((mi >> 1) * 8 + (lane & 7), 2 * dh + (mi & 1));
}
KDT_HD uint32_t rope_step(uint32_t base, int kh) { return 1024 * kh + base; }  // 16 keys = 8 lines

// PV warp pw, B fragments of P V (ldmatrix x4 .trans): matrices mi = 2 nc + kh8 hold keys 16 ks + 8 kh8 + 0..7 at
// output columns 64 pw + 16 np + 8 nc + 0..7 (local latent dims).
KDT_HD uint32_t v_base(int lane, int pw) {
  const int mi = lane >> 3, sw = lane & 7;
  return ((mi & 1) * 8 + sw) * LAT_ROW + 128 * pw + (((mi >> 1) ^ (sw & 1)) << 4) + ((sw >> 1) << 5);
}
KDT_HD uint32_t v_step(uint32_t base, int ks, int np) { return 16 * LAT_ROW * ks + (base ^ (uint32_t)(np << 5)); }

}  // namespace halves
}  // namespace kdt
