// What the role-split sm_120 kernels share (verify_sm120_roles.cuh, verify_sm120_e4m3.cuh; the row statistics and
// the P hand-off also verify_sm120_e4m3_32.cuh, BM = 32): a CTA of BM = 64 rows
// whose QK warp q finishes the softmax of m-tile q (rows 16 q .. 16 q + 15) and hands P, through shared memory and
// mbarriers, to PV warps that hold all BM rows' fp32 accumulators [4 m-tiles][NT n-tiles][4]. The run-time context,
// the mbarriers, the Q row pointer, the row statistics (mask, quad max, the reference maximum's move under P's rule,
// exponentials and row sums, their publication; bf16 P packed here, e4m3 P in e4m3_rows.cuh), the P hand-off from both
// sides, the PV MMAs of one V fragment pair and the epilogue. C is the kernel's configuration (BM, BN, SLOTS,
// DRAFT_PAIRS, QK_THREADS, PV_THREADS, O_PB, O_ALPHA, O_FLAGS, O_STATS, O_MBAR, MB_*). A QK lane (g = lane >> 2,
// t4 = lane & 3) holds NT n-tiles of 8 keys of its rows 16 q + g and + 8 per tile (roles 2); P of a tile
// is KS = NT / 2 k16 steps of m16n8k16 A fragments. Scores and maxima in log2 units; addresses are shared-space bytes.
#pragma once
#include <type_traits>

#include "../common/frame.cuh"

namespace kdt {

// Whether a configuration keeps its row statistics in a free ring slot (C::STATS_IN_RING) rather than at C::O_STATS.
template <class C, class = void>
struct StatsInRing : std::false_type {};
template <class C>
struct StatsInRing<C, std::void_t<decltype(C::STATS_IN_RING)>> : std::bool_constant<C::STATS_IN_RING> {};

// What the two roles share: the CTA's work, its shared memory, the ring's geometry. A prefix split's tile t is in
// slot t % SLOTS (depth SLOTS); the draft block's K and V tiles t are in the slot pair 2 i, 2 i + 1 with
// i = t % DRAFT_PAIRS (depth DRAFT_PAIRS).
template <class C>
struct RoleCtx {
  const Params& p;
  const Work& w;
  uint32_t base, mbar;
  int ntiles, depth;
  __device__ __forceinline__ int kslot(int t) const { return w.draft ? 2 * (t % C::DRAFT_PAIRS) : t % C::SLOTS; }
  __device__ __forceinline__ int vslot(int t) const { return w.draft ? 2 * (t % C::DRAFT_PAIRS) + 1 : t % C::SLOTS; }
  __device__ __forceinline__ uint32_t full(int t) const { return mbar + 8 * (C::MB_FULL + kslot(t)); }
  __device__ __forceinline__ uint32_t full_parity(int t) const { return (t / depth) & 1; }
  __device__ __forceinline__ uint32_t p_full(int t) const { return mbar + 8 * (C::MB_PFULL + (t & 1)); }
  __device__ __forceinline__ uint32_t p_empty(int t) const { return mbar + 8 * (C::MB_PEMPTY + (t & 1)); }
  __device__ __forceinline__ uint32_t stats_bar() const { return mbar + 8 * C::MB_STATS; }
  // the rescale factors [buffer][row], the flags [buffer][m-tile] and the row statistics (max [row], sum [BM + row])
  __device__ __forceinline__ float* alpha_s() const { return reinterpret_cast<float*>(smem_ptr(base + C::O_ALPHA)); }
  __device__ __forceinline__ int* flags_s() const { return reinterpret_cast<int*>(smem_ptr(base + C::O_FLAGS)); }
  // where C::STATS_IN_RING, a ring slot no tile uses once the QK warps leave their loop (they publish P(ntiles - 1)
  // only after the PV warps are done with tile ntiles - 3): tile ntiles - SLOTS's, read and never refilled, or,
  // under SLOTS tiles, the last slot, never loaded
  __device__ __forceinline__ float* stats() const {
    if constexpr (StatsInRing<C>::value) {
      static_assert(C::SLOTS >= 3 && 2 * C::BM * 4 <= C::TILE, "a free slot holds the statistics");
      const int slot = ntiles >= C::SLOTS ? ntiles % C::SLOTS : C::SLOTS - 1;
      return reinterpret_cast<float*>(smem_ptr(base + slot * C::TILE));
    } else {
      return reinterpret_cast<float*>(smem_ptr(base + C::O_STATS));
    }
  }
};

// The mbarriers both kernels have: FULL[SLOTS] (a ring slot's tile landed: every PV thread's cp.async arrival),
// P_FULL[2] (a P buffer written by the QK threads), P_EMPTY[2] (read by the PV threads), STATS (row statistics).
template <class C>
__device__ __forceinline__ void init_role_mbarriers(uint32_t mbar) {
#pragma unroll
  for (int s = 0; s < C::SLOTS; ++s) mbar_init(mbar + 8 * (C::MB_FULL + s), C::PV_THREADS);
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    mbar_init(mbar + 8 * (C::MB_PFULL + b), C::QK_THREADS);
    mbar_init(mbar + 8 * (C::MB_PEMPTY + b), C::PV_THREADS);
  }
  mbar_init(mbar + 8 * C::MB_STATS, C::QK_THREADS);
}

// Row r (0..BM-1) of the CTA's Q tile in global memory; nullptr past the request's rows. The node and head through
// node_head (a few instructions), computed for every row and selected after: no branch.
__device__ __forceinline__ const __nv_bfloat16* q_row(const Params& p, const Work& w, int r) {
  const int gr = w.row0 + r;
  const int2 th = node_head(gr, p.H);
  const __nv_bfloat16* row = p.q + (w.tok0 + th.x) * p.q_st + (int64_t)th.y * p.q_sh;
  return gr < w.rows_b ? row : nullptr;
}

// Visibility of this lane's 4 NT scores of the tile whose first key is key0 (relative to kbeg): bit 4 n + e is row
// 16 q + g + 8 (e >> 1) (draft node node0 or node1), key key0 + 8 n + 2 t4 + (e & 1). DRAFT: the tree mask; else
// keys before span (the split's key count).
template <bool DRAFT, int NT>
__device__ __forceinline__ uint32_t visible_bits(int key0, int t4, const DraftMask& dm, int node0, int node1,
                                                 int span) {
  static_assert(NT <= 8, "4 NT bits in a word");
  uint32_t bits = 0;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + 8 * n + 2 * t4 + (e & 1);
      const bool vis = DRAFT ? draft_visible(dm, (e >> 1) ? node1 : node0, key) : key < span;
      bits |= (vis ? 1u : 0u) << (4 * n + e);
    }
  return bits;
}

// A row's maximum and sum over its quad (the 4 lanes that hold a row of an accumulator fragment).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The lazy reference maximum of a row under P's rule R: m_ref moves only when the row's maximum mx passes it by more
// than R::SLACK, to R::HEADROOM below mx; alpha = 2^(old - new) where it moved, else 1. Returns whether it moved (the
// same decision in the row's 4 lanes). Bf16P: the bf16 P of the role split; E4m3Round (e4m3_rows.cuh): e4m3 P.
struct Bf16P {
  static constexpr float SLACK = RESCALE_SLACK, HEADROOM = 0.f;
};
template <class R>
__device__ __forceinline__ bool move_reference(const float& mx, float& m_ref, float& alpha) {
  const bool bump = mx > m_ref + R::SLACK;
  float next = mx;
  if constexpr (R::HEADROOM != 0.f) next = mx - R::HEADROOM;
  alpha = bump ? exp2f(m_ref - next) : 1.f;
  m_ref = bump ? next : m_ref;
  return bump;
}

// The exponentials of a tile's masked, scaled scores y (log2 units; -inf where masked) against the reference maxima,
// in place, and the running row sums l_part, rescaled by alpha.
template <int NT>
__device__ __forceinline__ void exp_rows(float (&y)[NT][4], const float (&m_ref)[2], const float (&alpha)[2],
                                         float (&l_part)[2]) {
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float mr = m_ref[e >> 1];
      y[n][e] = exp2f(y[n][e] - (mr == -INFINITY ? 0.f : mr));
      sum[e >> 1] += y[n][e];
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) l_part[h] = l_part[h] * alpha[h] + sum[h];
}

// A row's logit scale: one for every row, or one per row h of the lane (scale[h]).
__device__ __forceinline__ float row_scale(float scale, int) { return scale; }
__device__ __forceinline__ float row_scale(const float (&scale)[2], int h) { return scale[h]; }

// The softmax of one tile of m-tile q on registers only: mask (bits), the logit scale, row max over the quad, the
// reference maxima under P's rule R (move_reference), the exponentials y and the running row sums (exp_rows).
// Returns whether one of this lane's rows moved.
template <class R, int NT, class S>
__device__ __forceinline__ bool softmax_rows(const float (&x)[NT][4], uint32_t bits, const S& scale, float (&m_ref)[2],
                                             float (&l_part)[2], float (&y)[NT][4], float (&alpha)[2]) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      y[n][e] = (bits >> (4 * n + e)) & 1 ? x[n][e] * row_scale(scale, e >> 1) : -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], y[n][e]);
    }
  bool moved = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) moved |= move_reference<R>(quad_max(mx[h]), m_ref[h], alpha[h]);
  exp_rows(y, m_ref, alpha, l_part);
  return moved;
}

// softmax_rows with bf16 P: P as the A fragments of the tile's KS k16 steps (the accumulator layout of n-tiles 2 ks,
// 2 ks + 1 is the A layout).
template <int NT>
__device__ __forceinline__ bool softmax_tile(const float (&x)[NT][4], uint32_t bits, float scale, float (&m_ref)[2],
                                             float (&l_part)[2], uint32_t (&pk)[NT / 2][4], float (&alpha)[2]) {
  float y[NT][4];
  const bool moved = softmax_rows<Bf16P>(x, bits, scale, m_ref, l_part, y, alpha);
#pragma unroll
  for (int ks = 0; ks < NT / 2; ++ks) {
    pk[ks][0] = pack_bf16(y[2 * ks][0], y[2 * ks][1]);
    pk[ks][1] = pack_bf16(y[2 * ks][2], y[2 * ks][3]);
    pk[ks][2] = pack_bf16(y[2 * ks + 1][0], y[2 * ks + 1][1]);
    pk[ks][3] = pack_bf16(y[2 * ks + 1][2], y[2 * ks + 1][3]);
  }
  return moved;
}

// Byte offset, from O_PB, of lane's 16-byte A fragment of m-tile m, k16 step ks in P buffer b: buffers of KS steps
// x 4 m-tiles x 32 lanes.
template <int KS>
__device__ __forceinline__ uint32_t p_frag(int b, int ks, int m, int lane) {
  return (((b * KS + ks) * 4 + m) * 32 + lane) * 16;
}

// The rescale factors of m-tile q's P in buffer b: the rows' factors (alpha_s[buffer][row], written only when some
// row of the warp moved) and the m-tile's flag (flags_s[buffer][m-tile]).
template <class C>
__device__ __forceinline__ void publish_rescale(const RoleCtx<C>& c, int b, int q, int lane, const float (&alpha)[2],
                                                bool any_moved) {
  const int g = lane >> 2, t4 = lane & 3;
  float* alpha_s = c.alpha_s();
  int* flags_s = c.flags_s();
  if (any_moved && t4 == 0) {
    alpha_s[b * C::BM + 16 * q + g] = alpha[0];
    alpha_s[b * C::BM + 16 * q + 8 + g] = alpha[1];
  }
  if (lane == 0) flags_s[C::BM / 16 * b + q] = any_moved ? 1 : 0;
}

// Publish P(t) of m-tile q into buffer t & 1 once the PV group has read P(t - 2): the A fragments, the rescale
// factors (publish_rescale), then this thread's P_FULL arrival.
template <class C, int KS>
__device__ __forceinline__ void publish_p(const RoleCtx<C>& c, int t, int q, int lane, const uint32_t (&pk)[KS][4],
                                          const float (&alpha)[2], bool any_moved) {
  const int b = t & 1;
  if (t >= 2) mbar_wait(c.p_empty(t), ((t >> 1) + 1) & 1);  // the PV group has read P(t - 2)
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
    st_shared_v4(c.base + C::O_PB + p_frag<KS>(b, ks, q, lane), make_uint4(pk[ks][0], pk[ks][1], pk[ks][2], pk[ks][3]));
  publish_rescale(c, b, q, lane, alpha, any_moved);
  mbar_arrive(c.p_full(t));
}

// The row statistics of m-tile q for the PV group's epilogue: the reference maxima (stats[row]; the same in every
// key half, written by half 0) and the row sums of key half kh summed over the quad (stats[BM (1 + kh) + row]), then
// this thread's STATS arrival.
template <class C>
__device__ __forceinline__ void publish_row_stats(const RoleCtx<C>& c, const float (&m_ref)[2], float (&l_part)[2],
                                                  int q, int lane, int kh = 0) {
  const int g = lane >> 2, t4 = lane & 3;
  float* stats = c.stats();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_part[h] = quad_sum(l_part[h]);
    if (t4 == 0) {
      if (kh == 0) stats[16 * q + 8 * h + g] = m_ref[h];
      stats[C::BM * (1 + kh) + 16 * q + 8 * h + g] = l_part[h];
    }
  }
  mbar_arrive(c.stats_bar());
}

// PV side of P(t): wait until buffer b = t & 1 is published (P_FULL), then, where the flag of an m-tile is set
// (warp-uniform: some row moved its reference maximum), scale its accumulator rows by the published factors
// (elements 0, 1 on row 16 m + lane / 4, 2, 3 on + 8). Usually skipped.
template <class C, int NT>
__device__ __forceinline__ void acquire_p(const RoleCtx<C>& c, int t, float (&acc)[C::BM / 16][NT][4], int lane) {
  constexpr int MT = C::BM / 16;
  static_assert(MT == 4 || MT == 2, "the m-tiles' flags are one int4 or int2");
  const int b = t & 1;
  const float* alpha_s = c.alpha_s();
  const int* flags_s = c.flags_s();
  mbar_wait(c.p_full(t), (t >> 1) & 1);  // P(t), its rescale factors and flags are written
  int flm[MT];
  if constexpr (MT == 4) {
    const int4 fl = *reinterpret_cast<const int4*>(flags_s + 4 * b);
    flm[0] = fl.x, flm[1] = fl.y, flm[2] = fl.z, flm[3] = fl.w;
  } else {
    const int2 fl = *reinterpret_cast<const int2*>(flags_s + 2 * b);
    flm[0] = fl.x, flm[1] = fl.y;
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
    if (flm[m]) {
      const float a0 = alpha_s[b * C::BM + 16 * m + (lane >> 2)];
      const float a1 = alpha_s[b * C::BM + 16 * m + 8 + (lane >> 2)];
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        acc[m][n][0] *= a0;
        acc[m][n][1] *= a0;
        acc[m][n][2] *= a1;
        acc[m][n][3] *= a1;
      }
    }
}

// PV: the four m-tiles' A fragments of k16 step ks of P buffer b (pb: the buffers' shared address, O_PB).
template <int KS>
__device__ __forceinline__ void load_p(uint32_t pb, int b, int ks, int lane, uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint4 u = ld_shared_v4(pb + p_frag<KS>(b, ks, m, lane));
    pa[m][0] = u.x;
    pa[m][1] = u.y;
    pa[m][2] = u.z;
    pa[m][3] = u.w;
  }
}

// PV: one ldmatrix.trans B fragment pair vb (n-tiles 2 np, 2 np + 1 of 16 keys) times the four m-tiles' P A
// fragments pa, into the accumulators.
template <int NT>
__device__ __forceinline__ void pv_mma(float (&acc)[4][NT][4], const uint32_t (&pa)[4][4], const uint32_t (&vb)[4],
                                       int np) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    mma_bf16(acc[m][2 * np], pa[m], vb[0], vb[1]);
    mma_bf16(acc[m][2 * np + 1], pa[m], vb[2], vb[3]);
  }
}

// The PV epilogue: once the QK group's row statistics are in (stats_bar), this thread's columns of all BM rows as
// partial rows; `lead` threads also write the rows' LSEs. F4: 16 bytes a store (write_partial_row_f4, every lane
// calls it: the bf16 role split's PV warps); else 8 (write_partial_row: the 64-row e4m3 form's draft block, whose
// kernel's schedule the 16-byte form moved, +2.4% at the fp8 headline:
// data/results/h100/2026-12-06-qrcp-landing-and-partial-f4/).
template <bool F4, class C, int NT>
__device__ __forceinline__ void write_partial_rows(const RoleCtx<C>& c, const float (&acc)[C::BM / 16][NT][4],
                                                   bool lead, int col0, int lane) {
  constexpr int BM = C::BM;
  const Params& p = c.p;
  const Work& w = c.w;
  const float* stats = c.stats();
  mbar_wait(c.stats_bar(), 0);  // the QK group's row statistics
  const float vscale = w.draft ? 1.f : p.v_scale;
#pragma unroll
  for (int m = 0; m < BM / 16; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = 16 * m + 8 * h + (lane >> 2), gr = w.row0 + rr;
      if constexpr (F4)
        write_partial_row_f4<NT>(p, w.part0 + gr, gr < p.R, stats[rr], stats[BM + rr], vscale, lead, col0, acc[m], h);
      else if (gr < p.R)
        write_partial_row<NT>(p, w.part0 + gr, stats[rr], stats[BM + rr], vscale, lead, col0, acc[m], h);
    }
}

}  // namespace kdt
