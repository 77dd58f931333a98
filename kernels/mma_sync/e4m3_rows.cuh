// What the two e4m3 forms (verify_sm120_e4m3.cuh, 64 rows; verify_sm120_e4m3_32.cuh, 32 rows) round per row: the
// constants of their rounding, the Q prologue (a QK lane's two Q rows of one m-tile read from global memory, scaled
// per (token, head) row by Q_MAX / max|row| and split into two e4m3 terms as m16n8k32 A fragment registers), P's
// rounding to e4m3 in the accumulator's key order, and the PV epilogue of their interleaved output columns. The row
// statistics both share with the bf16 role split (the reference maximum's move, the exponentials and row sums, their
// publication) are in roles_common.cuh.
#pragma once
#include "../common/frame.cuh"
#include "roles_common.cuh"

namespace kdt {

struct E4m3Round {
  static constexpr float Q_MAX = 448.f;     // e4m3's largest finite value: a Q row's max |value| maps to it
  static constexpr float P_LOG2_MAX = 8.f;  // the reference moves before a P would pass 2^8 (e4m3: <= 448)
  static constexpr float P_HEADROOM = 4.f;  // log2: a new reference sits this far below the row maximum
  static constexpr int Q_LO_EXP = 4;        // Q's second e4m3 term is stored times 2^4 (within e4m3's range)
  static constexpr float SLACK = P_LOG2_MAX, HEADROOM = P_HEADROOM;  // P's rule (roles_common.cuh, move_reference)
  static_assert(P_HEADROOM < P_LOG2_MAX, "a moved reference leaves room before the next move");
};

// The Q prologue of a QK lane (g = lane >> 2, t4 = lane & 3): rows r0 + g (h = 0) and r0 + 8 + g (h = 1), of which
// the lane holds dims 32 j + 4 t4 .. + 3 and 32 j + 16 + 4 t4 .. + 3 of each 32-dim step j. The constructor reads
// both rows once for their max |value| over the quad: qs[h] maps it to Q_MAX, scale[h] is the row's logit scale with
// 1 / qs folded in. Q = (first + 2^-Q_LO_EXP second) / qs: first is Q's e4m3 rounding, second that of the rest times
// 2^Q_LO_EXP, so Q is held to about 2^-8 of each value (e4m3 alone: 2^-4, the error of SGLang's own fp8 kernel).
struct E4m3QRows {
  const __nv_bfloat16* row[2];
  float qs[2], scale[2];
  int t4;

  __device__ __forceinline__ E4m3QRows(const Params& p, const Work& w, int r0, int lane)
      : row{q_row(p, w, r0 + (lane >> 2)), q_row(p, w, r0 + 8 + (lane >> 2))}, t4(lane & 3) {
    float amax[2] = {0.f, 0.f};
#pragma unroll 6
    for (int j = 0; j < 18; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint2 v = ld4(h, 32 * j + 16 * half + 4 * t4);
          amax[h] = fmaxf(amax[h], fmaxf(fmaxf(fabsf(lo(v.x)), fabsf(hi(v.x))), fmaxf(fabsf(lo(v.y)), fabsf(hi(v.y)))));
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      amax[h] = quad_max(amax[h]);
      qs[h] = amax[h] > 0.f && isfinite(amax[h]) ? E4m3Round::Q_MAX / amax[h] : 1.f;
      scale[h] = p.scale_pre / qs[h];
    }
  }
  // 4 bf16 of row h at dim (8-byte aligned), zeros past the request's rows
  __device__ __forceinline__ uint2 ld4(int h, int dim) const {
    if (!row[h]) return make_uint2(0u, 0u);
    uint2 v;
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(row[h] + dim));
    return v;
  }
  static __device__ __forceinline__ float lo(uint32_t two) { return __uint_as_float(two << 16); }
  static __device__ __forceinline__ float hi(uint32_t two) { return __uint_as_float(two & 0xffff0000u); }
  // x's e4m3 byte; rest: what it leaves, times 2^Q_LO_EXP
  static __device__ __forceinline__ uint32_t split(float x, float& rest) {
    const uint32_t b = pack_e4m3x4(x, 0.f, 0.f, 0.f) & 0xffu;
    const uint32_t h = e4m3x2_to_f16x2(b);
    rest = (x - __half2float(*reinterpret_cast<const __half*>(&h))) * (float)(1 << E4m3Round::Q_LO_EXP);
    return b;
  }
  // A register 2 half + h of 32-dim step j (row h, dims 32 j + 16 half + 4 t4 .. + 3), straight from global memory:
  // of the first term and of the second
  __device__ __forceinline__ void terms(int j, int half, int h, uint32_t& first, uint32_t& second) const {
    const uint2 v = ld4(h, 32 * j + 16 * half + 4 * t4);
    float r0, r1, r2, r3;
    const uint32_t b0 = split(lo(v.x) * qs[h], r0), b1 = split(hi(v.x) * qs[h], r1);
    const uint32_t b2 = split(lo(v.y) * qs[h], r2), b3 = split(hi(v.y) * qs[h], r3);
    first = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
    second = pack_e4m3x4(r0, r1, r2, r3);
  }
};

// P of 16 keys (n-tiles a, b of the scores' accumulator layout) rounded to e4m3 as two m16n8k32 A registers: row g
// (keys 2 t4, + 1, 8 + 2 t4, + 1) and row g + 8. The key order is the accumulator's (k 4 t4 + i is key
// 2 t4 + (i & 1) + 8 (i >> 1)), which the PV side's V fragments follow.
__device__ __forceinline__ void pack_p_e4m3(const float (&a)[4], const float (&b)[4], uint32_t& row_g,
                                            uint32_t& row_g8) {
  row_g = pack_e4m3x4(a[0], a[1], b[0], b[1]);
  row_g8 = pack_e4m3x4(a[2], a[3], b[2], b[3]);
}

// The PV epilogue of an e4m3 form: once the QK group's row statistics are in, this warp's output columns
// col0 + 16 cc + 4 t4 .. + 3 (cc < CC) of the C::BM rows, which its accumulators hold as (even, odd, even, odd)
// columns in n-tiles 2 cc, 2 cc + 1 (elements 2 h, 2 h + 1 of row 16 m + 8 h + g), as partial rows in column order;
// a row's sum is the sum of its HALVES key halves' (stats[BM (1 + k) + row]); warp pw 0 writes the LSEs.
template <class C, int CC, int HALVES>
__device__ __forceinline__ void write_partial_rows_e4m3(const RoleCtx<C>& c, const float (&acc)[C::BM / 16][2 * CC][4],
                                                        int pw, int col0, int lane) {
  const Params& p = c.p;
  const Work& w = c.w;
  const float* stats = c.stats();
  mbar_wait(c.stats_bar(), 0);  // the QK group's row statistics
  pdl_launch_dependents();
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int m = 0; m < C::BM / 16; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = 16 * m + 8 * h + g, gr = w.row0 + rr;
      if (gr >= p.R) continue;
      float l = stats[C::BM + rr];
#pragma unroll
      for (int k = 1; k < HALVES; ++k) l += stats[C::BM * (1 + k) + rr];
      const float inv = l > 0.f ? p.v_scale / l : 0.f;
      const int64_t prow = w.part0 + gr;
      if (pw == 0 && t4 == 0) p.lse_part[prow] = l > 0.f ? stats[rr] + log2f(l) : -INFINITY;
      float* dst = p.o_part + prow * D_V + col0 + 4 * t4;
#pragma unroll
      for (int cc = 0; cc < CC; ++cc)
        *reinterpret_cast<float4*>(dst + 16 * cc) =
            make_float4(acc[m][2 * cc][2 * h] * inv, acc[m][2 * cc + 1][2 * h] * inv,
                        acc[m][2 * cc][2 * h + 1] * inv, acc[m][2 * cc + 1][2 * h + 1] * inv);
    }
}

}  // namespace kdt
