// What the two e4m3 forms (verify_sm120_e4m3.cuh, 64 rows; verify_sm120_e4m3_32.cuh, 32 rows) round per row: the
// constants of their rounding, Q's split into two e4m3 terms (which the Q pass, e4m3_q_pass.cuh, runs once per call
// for both forms), P's rounding to e4m3 in the accumulator's key order, and the PV epilogue of their interleaved output
// columns. The row statistics both share with the bf16 role split (the reference maximum's move, the exponentials
// and row sums, their publication) are in roles_common.cuh.
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

// Q's terms: each (token, head) row is scaled by qs = Q_MAX / max|row| (its logit scale, scale_pre / qs, takes the
// 1 / qs back) and split into two e4m3 terms, Q = (first + 2^-Q_LO_EXP second) / qs: first is Q's e4m3 rounding,
// second that of the rest times 2^Q_LO_EXP, so Q is held to about 2^-8 of each value (e4m3 alone: 2^-4, the error
// of SGLang's own fp8 kernel). A row's values are read 4 bf16 at a time (e4m3_q_ld4), each 4 giving one 32-bit
// word of either term (e4m3_q_split4), as an m16n8k32 A register holds them.

// 4 bf16 of row h at dim (8-byte aligned), zeros past the request's rows
__device__ __forceinline__ uint2 e4m3_q_ld4(const __nv_bfloat16* const (&row)[2], int h, int dim) {
  if (!row[h]) return make_uint2(0u, 0u);
  uint2 v;
  asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(row[h] + dim));
  return v;
}
__device__ __forceinline__ float bf16_lo(uint32_t two) { return __uint_as_float(two << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t two) { return __uint_as_float(two & 0xffff0000u); }

// amax folded with the max |value| of 4 bf16 (one e4m3_q_ld4)
__device__ __forceinline__ float e4m3_q_absmax(float amax, uint2 v) {
  return fmaxf(amax,
               fmaxf(fmaxf(fabsf(bf16_lo(v.x)), fabsf(bf16_hi(v.x))), fmaxf(fabsf(bf16_lo(v.y)), fabsf(bf16_hi(v.y)))));
}
// a row's qs and scale from its max |value| (amax, over the whole row)
__device__ __forceinline__ void e4m3_q_scale_of(const Params& p, float amax, float& qs, float& scale) {
  qs = amax > 0.f && isfinite(amax) ? E4m3Round::Q_MAX / amax : 1.f;
  scale = p.scale_pre / qs;
}

// x's e4m3 byte; rest: what it leaves, times 2^Q_LO_EXP
__device__ __forceinline__ uint32_t e4m3_q_split(float x, float& rest) {
  const uint32_t b = pack_e4m3x4(x, 0.f, 0.f, 0.f) & 0xffu;
  const uint32_t h = e4m3x2_to_f16x2(b);
  rest = (x - __half2float(*reinterpret_cast<const __half*>(&h))) * (float)(1 << E4m3Round::Q_LO_EXP);
  return b;
}

// 4 bf16 of a row (one e4m3_q_ld4) times the row's qs as one word of 4 e4m3 values of each term: first, Q's e4m3
// rounding, and second, that of the rest times 2^Q_LO_EXP
__device__ __forceinline__ void e4m3_q_split4(uint2 v, float qs, uint32_t& first, uint32_t& second) {
  float r0, r1, r2, r3;
  const uint32_t b0 = e4m3_q_split(bf16_lo(v.x) * qs, r0), b1 = e4m3_q_split(bf16_hi(v.x) * qs, r1);
  const uint32_t b2 = e4m3_q_split(bf16_lo(v.y) * qs, r2), b3 = e4m3_q_split(bf16_hi(v.y) * qs, r3);
  first = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
  second = pack_e4m3x4(r0, r1, r2, r3);
}

// P of 16 keys (n-tiles a, b of the scores' accumulator layout) rounded to e4m3 as two m16n8k32 A registers: row g
// (keys 2 t4, + 1, 8 + 2 t4, + 1) and row g + 8. The key order is the accumulator's (k 4 t4 + i is key
// 2 t4 + (i & 1) + 8 (i >> 1)), which the PV side's V fragments follow.
__device__ __forceinline__ void pack_p_e4m3(const float (&a)[4], const float (&b)[4], uint32_t& row_g,
                                            uint32_t& row_g8) {
  row_g = pack_e4m3x4(a[0], a[1], b[0], b[1]);
  row_g8 = pack_e4m3x4(a[2], a[3], b[2], b[3]);
}

// The PV epilogue of an e4m3 form: once the QK group's row statistics are in, this warp's output columns
// 16 CC pw + 16 cc + 4 t4 .. + 3 (cc < CC) of the C::BM rows, which its accumulators hold as (even, odd, even, odd)
// columns in n-tiles 2 cc, 2 cc + 1 (elements 2 h, 2 h + 1 of row 16 m + 8 h + g), as partial rows in column order;
// a row's sum is the sum of its HALVES key halves' (stats[BM (1 + k) + row]); warp pw 0 writes the LSEs.
template <class C, int CC, int HALVES>
__device__ __forceinline__ void write_partial_rows_e4m3(const RoleCtx<C>& c, const float (&acc)[C::BM / 16][2 * CC][4],
                                                        int pw, int lane) {
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
      float* dst = p.o_part + prow * D_V + 16 * CC * pw + 4 * t4;
#pragma unroll
      for (int cc = 0; cc < CC; ++cc)
        *reinterpret_cast<float4*>(dst + 16 * cc) =
            make_float4(acc[m][2 * cc][2 * h] * inv, acc[m][2 * cc + 1][2 * h] * inv,
                        acc[m][2 * cc][2 * h + 1] * inv, acc[m][2 * cc + 1][2 * h + 1] * inv);
    }
}

}  // namespace kdt
