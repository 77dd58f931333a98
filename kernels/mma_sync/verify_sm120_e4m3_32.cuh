// The 32-row sm_120 kernel for fp8 pools on e4m3 tensor cores (impl cuda_sm120_e4m3_32): what a 99 KB GPU runs for
// 32 rows and fewer (an EAGLE-3 / MTP chain of 4 at 8 local heads) over an fp8 pool. docs/performance.md ("The
// 32-row e4m3 configuration") has the design, its prediction and the measurements; docs/kernels.md the accuracy,
// which is the 64-row e4m3 configuration's (verify_sm120_e4m3.cuh): Q as two e4m3 terms per (token, head) row, P
// in e4m3 with its reference P_HEADROOM below the row maximum, K and V the pool's bytes, fp32 sums.
//
// Why: the first sm_120 kernel (verify_sm120.cuh) runs every warp through the whole step behind three block
// barriers; at one CTA of 8 warps per SM it is latency-bound, over either pool the same cycles (Nsight Compute,
// docs/performance.md), so an fp8 pool's half bytes bought nothing. Here the step is split by role and pipelined,
// and the QK chain of a 32-key tile is split over two warps per m-tile, so that a tile costs less than its bytes:
//   QK group, warps 0-3: warp q holds m-tile mq = q & 1 (rows 16 mq .. + 15) and key half kh = q >> 1 (keys
//     16 kh .. + 15 of each 32-key tile): both e4m3 terms of its rows' Q over all 576 dims in registers (144), per
//     tile 18 ldmatrix.x4 and 72 MMAs in CHAINS independent accumulator chains per n-tile. The two warps of an
//     m-tile meet once per tile (a named barrier of 64 threads) to take the row maximum over the tile's 32 keys,
//     so both keep the same reference maximum; each publishes its half of P's m16n8k32 A fragment (its 16 keys are
//     k 0-15 / 16-31 of the fragment, in the accumulator's own key order as in the 64-row form) and keeps its
//     share of the row sums. Software-pipelined: tile t + 1's MMAs in one basic block with tile t's exponentials.
//   PV group, warps 4-7: warp pw owns output columns 128 pw .. + 127 of the 32 rows (128 fp32 accumulators per
//     thread); per tile 8 ldmatrix.x4.trans and 32 prmt give its V fragments, then the slot is refilled (the
//     early refill of the 64-row form), then 32 MMAs. The PV warps load the ring (four 32-key e4m3 tiles, 72 KB,
//     loaded four tiles ahead; one mbarrier per slot completed by cp.async.mbarrier.arrive).
// Every hand-off between the groups is an mbarrier (P in two buffers, the row statistics). 256 threads and at most
// 255 registers each (no setmaxnreg). The draft-block CTA runs the first sm_120 kernel's exact bf16 path
// (sm120_cta) in the same 256 threads and its 86,912 B layout, which is what the launch gives every CTA.
#pragma once
#include "../common/frame.cuh"
#include "e4m3_q_pass.cuh"
#include "e4m3_rows.cuh"
#include "roles_common.cuh"
#include "verify_sm120.cuh"

namespace kdt {

struct CfgE4m3x32 {
  static constexpr int BM = 32, BN = 32;                    // rows per CTA, keys per tile
  static constexpr int QK_WARPS = 4, PV_WARPS = 4, THREADS = (QK_WARPS + PV_WARPS) * 32;
  static constexpr int QK_THREADS = QK_WARPS * 32, PV_THREADS = PV_WARPS * 32;
  static constexpr int SLOTS = 4, DRAFT_PAIRS = 1;          // DRAFT_PAIRS: unused (the draft block runs sm120_cta)
  static constexpr int CHAINS = 4;                          // accumulator chains per n-tile: (term, parity of j)
  static constexpr int ROW8 = e4m3::ROW, TILE = e4m3::TILE; // 576 B rows, 18,432 B tiles (common/layout.cuh)
  static constexpr int RING = SLOTS * TILE;                 // 73,728
  static constexpr int PB = 2 * 2 * 32 * 16;                // P A fragments: 2 buffers x 2 m-tiles x 32 lanes x 16 B
  static constexpr int XMAX = 2 * 2 * BM * 4;               // row maxima of a tile: 2 buffers x 2 key halves x 32
  static constexpr int ALPHA = 2 * BM * 4;                  // rescale factors: 2 buffers x 32 rows
  static constexpr int FLAGS = 2 * 2 * 4;                   // per buffer and m-tile: some row's factor is not 1
  static constexpr int STATS = 3 * BM * 4;                  // final row max [row], row sums of key half kh [BM (1 + kh) + row]
  static constexpr int MB_FULL = 0, MB_PFULL = SLOTS, MB_PEMPTY = SLOTS + 2, MB_STATS = SLOTS + 4,
                       MBARS = (SLOTS + 5) * 8;
  static constexpr int O_PB = RING, O_XMAX = O_PB + PB, O_ALPHA = O_XMAX + XMAX, O_FLAGS = O_ALPHA + ALPHA,
                       O_STATS = O_FLAGS + FLAGS, O_MBAR = O_STATS + STATS;
  static constexpr int PREFIX_SMEM = O_MBAR + MBARS;
  static constexpr int SMEM = PREFIX_SMEM > Cfg120<2>::SMEM ? PREFIX_SMEM : Cfg120<2>::SMEM;  // what the launch gives
  static constexpr int BAR_PAIR = 1;                        // named barriers 1, 2: the QK warps of m-tile 0, 1
  static constexpr int BAR_PV = 3;                          // the PV warps, before a refill
  static_assert(THREADS == Cfg120<2>::THREADS, "the draft block runs the first kernel's CTA");
  static_assert(O_MBAR % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(SMEM <= 101376, "sm_120 allows 99 KB of dynamic shared memory per block");
};

static_assert(Q8_ROWS_ALIGN % CfgE4m3x32::BM == 0, "every m-tile a CTA loads is in the Q pass's rows");
using E4m3x32Ctx = RoleCtx<CfgE4m3x32>;

// The QK group of a prefix split (warps 0..3): m-tile mq, key half kh.
__device__ __forceinline__ void e4m3x32_qk(const E4m3x32Ctx& c) {
  using C = CfgE4m3x32;
  const Params& p = c.p;
  const Work& w = c.w;
  const int lane = threadIdx.x & 31, q = threadIdx.x >> 5, mq = q & 1, kh = q >> 1, g = lane >> 2, t4 = lane & 3;
  // the Q prologue: both terms' A fragments of rows 16 mq + g, + 8 in registers, as the Q pass wrote them
  // (e4m3_q_pass.cuh), once it is done
  pdl_wait();
  const Q8Tile qt(p, w, mq, lane);
  uint32_t qf[18][4], ql[18][4];
#pragma unroll
  for (int j = 0; j < 18; ++j) qt.load(0, j, qf[j]), qt.load(1, j, ql[j]);
  phase_mark(0, PH_PROLOGUE);

  // K fragments of this warp's 16 keys (common/layout.cuh, e4m3::k_frag_base, + 16 rows for the second half)
  const uint32_t kofs[2] = {e4m3::k_frag_base(lane, 0) + 16 * C::ROW8 * kh, e4m3::k_frag_base(lane, 1) + 16 * C::ROW8 * kh};
  const DraftMask dm = draft_mask(p, w);
  const int span = w.kend - w.kbeg;
  float m_ref[2] = {-INFINITY, -INFINITY}, l_part[2] = {0.f, 0.f};
  float* xmax = reinterpret_cast<float*>(smem_ptr(c.base + C::O_XMAX));

  // [chain][n-tile][4]: chain (term, parity of j) for CHAINS = 4, (term) for 2
  float sc[C::CHAINS][2][4];
  auto qk_mma = [&](uint32_t kt) {
#pragma unroll
    for (int k = 0; k < C::CHAINS; ++k)
#pragma unroll
      for (int n = 0; n < 2; ++n) sc[k][n][0] = sc[k][n][1] = sc[k][n][2] = sc[k][n][3] = 0.f;
#if defined(KDT_E4M3_EMULATED)
    // where e4m3 MMAs are emulated (sm_90), Q must stay e4m3 in registers: f16 copies hoisted out of the tile loop
    // would need 288 registers and spill (no instruction is emitted)
#pragma unroll
    for (int j = 0; j < 18; ++j) {
      asm volatile("" : "+r"(qf[j][0]), "+r"(qf[j][1]), "+r"(qf[j][2]), "+r"(qf[j][3]));
      asm volatile("" : "+r"(ql[j][0]), "+r"(ql[j][1]), "+r"(ql[j][2]), "+r"(ql[j][3]));
    }
#endif
#pragma unroll
    for (int j = 0; j < 18; ++j) {
      uint32_t kb[4];
      ldsm_x4(kb, kt + kofs[j & 1] + 64 * (j >> 1));
      constexpr int PAR = C::CHAINS / 2;  // chains per term
      const int ch = PAR > 1 ? (j & 1) : 0;
      mma_e4m3(sc[ch][0], qf[j], kb[0], kb[1]);
      mma_e4m3(sc[ch][1], qf[j], kb[2], kb[3]);
      mma_e4m3<-E4m3Round::Q_LO_EXP>(sc[PAR + ch][0], ql[j], kb[0], kb[1]);
      mma_e4m3<-E4m3Round::Q_LO_EXP>(sc[PAR + ch][1], ql[j], kb[2], kb[3]);
    }
  };

  mbar_wait(c.full(0), c.full_parity(0));
  phase_mark(0, PH_FIRST);
  qk_mma(c.base + c.kslot(0) * C::TILE);
  for (int t = 0; t < c.ntiles; ++t) {
    const bool more = t + 1 < c.ntiles;
    const int b = t & 1;
    float y[2][4], mx[2] = {-INFINITY, -INFINITY};
    const uint32_t bits = visible_bits<false, 2>(t * C::BN + 16 * kh, t4, dm, 0, 0, span);
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = 0.f;
#pragma unroll
        for (int k = 0; k < C::CHAINS; ++k) x += sc[k][n][e];
        y[n][e] = (bits >> (4 * n + e)) & 1 ? x * qt.scale[e >> 1] : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], y[n][e]);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = quad_max(mx[h]);
      if (t4 == 0) xmax[(2 * b + kh) * C::BM + 16 * mq + 8 * h + g] = mx[h];
    }
    bar_named(C::BAR_PAIR + mq, 64);  // both key halves' maxima of the tile are written
#pragma unroll
    for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], xmax[(2 * b + (kh ^ 1)) * C::BM + 16 * mq + 8 * h + g]);
    if (more) mbar_wait(c.full(t + 1), c.full_parity(t + 1));
    // one basic block: tile t + 1's MMAs (the last iteration re-reads tile t, whose result is dropped) beside tile
    // t's exponentials
    qk_mma(c.base + c.kslot(more ? t + 1 : t) * C::TILE);
    bool moved = false;
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)  // the same decision in both key halves' warps (the same two maxima)
      moved |= move_reference<E4m3Round>(mx[h], m_ref[h], alpha[h]);
    exp_rows(y, m_ref, alpha, l_part);
    // this warp's half of the A fragment: registers 2 kh (row g), 2 kh + 1 (row g + 8)
    uint32_t pk0, pk1;
    pack_p_e4m3(y[0], y[1], pk0, pk1);
    const bool any_moved = __any_sync(0xffffffffu, moved);
    if (t >= 2) mbar_wait(c.p_empty(t), ((t >> 1) + 1) & 1);  // the PV group has read P(t - 2)
    asm volatile("st.shared.v2.u32 [%0], {%1,%2};\n" ::"r"(c.base + C::O_PB + ((b * 2 + mq) * 32 + lane) * 16 + 8 * kh),
                 "r"(pk0), "r"(pk1) : "memory");
    if (kh == 0) publish_rescale(c, b, mq, lane, alpha, any_moved);
    mbar_arrive(c.p_full(t));
    if (t == 0) phase_mark(0, PH_TILE0);
  }
  phase_mark(0, PH_LOOP);
  publish_row_stats(c, m_ref, l_part, mq, lane, kh);  // the reference maxima (the same in both halves), each half's sums
  phase_mark(0, PH_DONE);
}

// The PV group of a prefix split (warps 4..7): loads the ring, multiplies P V into output columns 128 pw .. + 127
// of the 32 rows, writes the partial rows in column order.
__device__ __forceinline__ void e4m3x32_pv(const E4m3x32Ctx& c) {
  using C = CfgE4m3x32;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, pw = (tid >> 5) - C::QK_WARPS, v = tid - C::QK_THREADS;
  // loads: this thread moves 16-byte chunks lch + 4 k (k < 9) of key row lrow of a tile; chunk lch + 4 k of row r
  // sits at position (lch ^ s) + 4 k with s = (r >> 1) & 3 < 4 (e4m3::tile_offset)
  const int lrow = v >> 2, lch = v & 3;
  const uint32_t dst0 = e4m3::tile_offset(lrow, lch);
  const unsigned char* kb8 = reinterpret_cast<const unsigned char*>(p.kb);
  auto fetch = [&](int t) -> int64_t {
    const int key = w.kbeg + t * C::BN + lrow;
    return key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
  };
  auto load_tile = [&](int t, int64_t raw) {
    const bool ok = w.kbeg + t * C::BN + lrow < w.kend;
    const int64_t slot = ok ? checked_slot(p, raw, lch == 0) : 0;
    const unsigned char* src = kb8 + slot * p.kb_s + 16 * lch;
    const uint32_t d = c.base + c.kslot(t) * C::TILE + dst0;
#pragma unroll
    for (int k = 0; k < 9; ++k) cp_async_16s(d + 64 * k, src + 64 * k, ok ? 16 : 0);
    cp_async_mbar_arrive(c.full(t));
  };
  for (int t = 0; t < c.depth && t < c.ntiles; ++t) load_tile(t, fetch(t));
  int64_t pending = fetch(c.depth);
  phase_mark(0, PH_PROLOGUE);

  // V fragments: matrix mi is keys 8 mi + (lane & 7), chunk 8 pw + cc at 8 pw + (cc ^ s), s = (lane >> 1) & 3
  const int s = e4m3::lane_swizzle(lane);
  const uint32_t vrow = (8 * (lane >> 3) + (lane & 7)) * C::ROW8 + 128 * pw;
  float acc[2][16][4];  // [m-tile][n-tile 2 cc (even columns of chunk cc) / 2 cc + 1 (odd)][4]
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 16; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;

  for (int t = 0; t < c.ntiles; ++t) {
    const int b = t & 1;
    acquire_p(c, t, acc, lane);
    if (t == 0) phase_mark(0, PH_FIRST);
    mbar_wait(c.full(t), c.full_parity(t));  // the tile's V (complete: the QK group waited on it)
    const uint32_t vt = c.base + c.kslot(t) * C::TILE + vrow;
    uint32_t vb[8][4];  // [chunk cc] the B fragments of its even columns (0, 1) and odd columns (2, 3)
#pragma unroll
    for (int cc = 0; cc < 8; ++cc) {
      uint32_t r[4];  // keys 2 t4, 2 t4 + 1 of 8-key group i, columns 2 g, 2 g + 1 of the chunk (byte pairs)
      ldsm_x4_trans(r, vt + 16 * (cc ^ s));
      vb[cc][0] = prmt(r[0], r[1], 0x6420u), vb[cc][1] = prmt(r[2], r[3], 0x6420u);  // column 2 g
      vb[cc][2] = prmt(r[0], r[1], 0x7531u), vb[cc][3] = prmt(r[2], r[3], 0x7531u);  // column 2 g + 1
    }
    if (t + c.depth < c.ntiles) {
      bar_named(C::BAR_PV, C::PV_THREADS);  // every PV warp holds its fragments of this slot
      load_tile(t + c.depth, pending);
      pending = fetch(t + c.depth + 1);
    }
    uint32_t pm[2][4];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      const uint4 u = ld_shared_v4(c.base + C::O_PB + ((b * 2 + m) * 32 + lane) * 16);
      pm[m][0] = u.x, pm[m][1] = u.y, pm[m][2] = u.z, pm[m][3] = u.w;
    }
    if (t + 2 < c.ntiles) mbar_arrive(c.p_empty(t));  // P buffer b may take P(t + 2)
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int cc = 0; cc < 8; ++cc) {
        mma_e4m3(acc[m][2 * cc], pm[m], vb[cc][0], vb[cc][1]);
        mma_e4m3(acc[m][2 * cc + 1], pm[m], vb[cc][2], vb[cc][3]);
      }
    if (t == 0) phase_mark(0, PH_TILE0);
  }
  cp_async_wait<0>();
  phase_mark(0, PH_LOOP);

  write_partial_rows_e4m3<C, 8, 2>(c, acc, pw, lane);  // e4m3_rows.cuh
  phase_mark(0, PH_DONE);
}

__global__ void __launch_bounds__(CfgE4m3x32::THREADS, 1) verify_sm120_e4m3_32_kernel(Params p) {
  using C = CfgE4m3x32;
  extern __shared__ __align__(128) unsigned char smem[];
  phase_mark(0, PH_ENTRY);
  Work w;
  if (!setup_work<C::BM, C::THREADS>(p, C::BN, w)) return;
  phase_mark(0, PH_WORK);
  if (w.draft) {  // the draft block: the first kernel's exact bf16 path, its layout and 32-key steps
    phase_meta(0, true);
    sm120_cta<C::BM, 2, false>(p, w, smem);
    phase_mark(0, PH_DONE);
    return;
  }
  const uint32_t base = smem_u32(smem);
  const E4m3x32Ctx c{p, w, base, base + C::O_MBAR, (w.kend - w.kbeg + C::BN - 1) / C::BN, C::SLOTS};
  phase_meta(c.ntiles, false);
  if (threadIdx.x == 0) init_role_mbarriers<C>(c.mbar);
  __syncthreads();
  phase_mark(0, PH_READY);
  if (threadIdx.x >= C::QK_THREADS)
    e4m3x32_pv(c);
  else
    e4m3x32_qk(c);
}

constexpr ConfigEntry sm120_e4m3_32_entry() {
  return ConfigEntry{CfgE4m3x32::BM, CfgE4m3x32::SLOTS, CfgE4m3x32::THREADS, CfgE4m3x32::SMEM, CfgE4m3x32::BN,
                     "verify_sm120_e4m3_32_kernel", &verify_sm120_e4m3_32_kernel, ARCH_MMA_SYNC, KV_FP8_BIT,
                     1, true};  // one CTA a row tile; after the Q pass
}

}  // namespace kdt
