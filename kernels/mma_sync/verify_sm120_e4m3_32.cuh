// The 32-row sm_120 kernel for fp8 pools on e4m3 tensor cores (impl cuda_sm120_e4m3_32): what a 99 KB GPU runs for
// 32 rows and fewer (an EAGLE-3 / MTP chain of 4 at 8 local heads) over an fp8 pool. docs/performance.md ("The
// 32-row e4m3 configuration") has the design, its prediction and the measurements; docs/kernels.md the accuracy,
// which is the 64-row e4m3 configuration's (verify_sm120_e4m3.cuh): Q as two e4m3 terms per (token, head) row, P
// in e4m3 with its reference P_HEADROOM below the row maximum, K and V the pool's bytes, fp32 sums.
//
// Why: the first sm_120 kernel (verify_sm120.cuh) runs every warp through the whole step behind three block
// barriers; at one CTA of 8 warps per SM it is latency-bound, over either pool the same cycles (Nsight Compute,
// docs/performance.md), so an fp8 pool's half bytes bought nothing. Here the step is split by role and pipelined,
// and the softmax walks 64-key steps (two 32-key ring tiles), so that the per-step hand-offs (the row maximum's
// barrier, P, the refill's barrier) are paid once per 64 keys:
//   QK group, warps 0-3: warp q holds m-tile mq = q & 1 (rows 16 mq .. + 15) and, of step s, tile 2 s + kh with
//     kh = q >> 1: both e4m3 terms of its rows' Q over all 576 dims in registers (144), per step 36 ldmatrix.x4
//     and 144 MMAs in eight independent accumulator chains (2 terms x 4 n-tiles). The two warps of an m-tile meet
//     once per step (a named barrier of 64 threads) to take the row maximum over the step's 64 keys, so both keep
//     the same reference maximum; each publishes its tile's P as one m16n8k32 A fragment (in the accumulator's own
//     key order as in the 64-row form) and keeps its share of the row sums, and arrives on its tile's K_EMPTY as
//     soon as its scores are in registers. Software-pipelined: step s + 1's MMAs in one basic block with step s's
//     exponentials.
//   PV group, warps 4-7: warp pw owns output columns 128 pw .. + 127 of the 32 rows (128 fp32 accumulators per
//     thread); per step 16 ldmatrix.x4.trans and 64 prmt give its V fragments of both tiles, then (after both
//     tiles' K_EMPTY) the two slots are refilled, then P is taken and 64 MMAs issued. The PV warps load the ring
//     (four 32-key e4m3 tiles, 72 KB, loaded four tiles ahead; one mbarrier per slot completed by
//     cp.async.mbarrier.arrive): a step's refilled tiles are wanted one QK step later.
// Every hand-off between the groups is an mbarrier (P in two buffers, K_EMPTY per slot, the row statistics). 256
// threads and at most 255 registers each (no setmaxnreg). The draft-block CTA runs the first sm_120 kernel's exact
// bf16 path (sm120_cta) in the same 256 threads and its 86,912 B layout, what the launch gives every CTA (a prefix
// CTA uses 79,096 B).
#pragma once
#include "../common/frame.cuh"
#include "e4m3_q_pass.cuh"
#include "e4m3_rows.cuh"
#include "roles_common.cuh"
#include "verify_sm120.cuh"

namespace kdt {

struct CfgE4m3x32 {
  static constexpr int BM = 32, BN = 32;                    // rows per CTA, keys per tile (a ring slot)
  static constexpr int STEP = 2;                            // tiles per softmax step: 64 keys
  static constexpr int QK_WARPS = 4, PV_WARPS = 4, THREADS = (QK_WARPS + PV_WARPS) * 32;
  static constexpr int QK_THREADS = QK_WARPS * 32, PV_THREADS = PV_WARPS * 32;
  static constexpr int SLOTS = 4, DRAFT_PAIRS = 1;          // DRAFT_PAIRS: unused (the draft block runs sm120_cta)
  static constexpr int ROW8 = e4m3::ROW, TILE = e4m3::TILE; // 576 B rows, 18,432 B tiles (common/layout.cuh)
  static constexpr int RING = SLOTS * TILE;                 // 73,728
  static constexpr int PB = 2 * 2 * STEP * 32 * 16;         // P A fragments [buffer][m-tile][tile][lane], 16 B each
  static constexpr int XMAX = 2 * 2 * BM * 4;               // row maxima of a step: 2 buffers x 2 tiles x 32
  static constexpr int ALPHA = 2 * BM * 4;                  // rescale factors: 2 buffers x 32 rows
  static constexpr int FLAGS = 2 * 2 * 4;                   // per buffer and m-tile: some row's factor is not 1
  static constexpr int STATS = 3 * BM * 4;                  // final row max [row], row sums of tile kh [BM (1 + kh) + row]
  // mbarriers: FULL[SLOTS] (a slot's tile landed), K_EMPTY[SLOTS] (its two QK warps are done with its keys), P_FULL[2],
  // P_EMPTY[2], STATS
  static constexpr int MB_FULL = 0, MB_KEMPTY = SLOTS, MB_PFULL = 2 * SLOTS, MB_PEMPTY = 2 * SLOTS + 2,
                       MB_STATS = 2 * SLOTS + 4, MBARS = (2 * SLOTS + 5) * 8;
  static constexpr int O_PB = RING, O_XMAX = O_PB + PB, O_ALPHA = O_XMAX + XMAX, O_FLAGS = O_ALPHA + ALPHA,
                       O_STATS = O_FLAGS + FLAGS, O_MBAR = O_STATS + STATS;
  static constexpr int PREFIX_SMEM = O_MBAR + MBARS;
  static constexpr int SMEM = PREFIX_SMEM > Cfg120<2>::SMEM ? PREFIX_SMEM : Cfg120<2>::SMEM;  // what the launch gives
  static constexpr int BAR_PAIR = 1;                        // named barriers 1, 2: the QK warps of m-tile 0, 1
  static constexpr int BAR_PV = 3;                          // the PV warps, before a refill
  static_assert(THREADS == Cfg120<2>::THREADS, "the draft block runs the first kernel's CTA");
  static_assert(STEP == 2, "a step is one tile for each of an m-tile's two QK warps");
  static_assert(O_MBAR % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(SMEM <= 101376, "sm_120 allows 99 KB of dynamic shared memory per block");
};

static_assert(Q8_ROWS_ALIGN % CfgE4m3x32::BM == 0, "every m-tile a CTA loads is in the Q pass's rows");
using E4m3x32Ctx = RoleCtx<CfgE4m3x32>;

// K_EMPTY of tile t's slot: the two QK warps that read tile t (kh = t & 1) arrive once they hold its scores, and the
// PV warps refill the slot only after it (and after every PV warp holds the tile's V fragments), before P is in.
__device__ __forceinline__ uint32_t k_empty(const E4m3x32Ctx& c, int t) {
  return c.mbar + 8 * (CfgE4m3x32::MB_KEMPTY + t % CfgE4m3x32::SLOTS);
}

// The QK group of a prefix split (warps 0..3): m-tile mq, and of each 64-key step s the tile 2 s + kh (32 keys).
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

  // K fragments of a tile's keys 0-15 (common/layout.cuh, e4m3::k_frag_base), keys 16-31 at + 16 rows
  const uint32_t kofs[2] = {e4m3::k_frag_base(lane, 0), e4m3::k_frag_base(lane, 1)};
  const DraftMask dm = draft_mask(p, w);
  const int span = w.kend - w.kbeg, nsteps = (c.ntiles + C::STEP - 1) / C::STEP;
  // this warp's tile of step s; past the last tile (an odd count's last step, kh = 1) the last tile is read again
  // and its scores dropped: every key of tile 2 s + kh is at or past span, so the mask takes them all
  auto tile_of = [&](int s) { return min(C::STEP * s + kh, c.ntiles - 1); };
  float m_ref[2] = {-INFINITY, -INFINITY}, l_part[2] = {0.f, 0.f};
  float* xmax = reinterpret_cast<float*>(smem_ptr(c.base + C::O_XMAX));

  // [term][n-tile][4]: 2 terms x 4 n-tiles, eight independent accumulator chains
  float sc[2][4][4];
  auto qk_mma = [&](uint32_t kt) {
#pragma unroll
    for (int k = 0; k < 2; ++k)
#pragma unroll
      for (int n = 0; n < 4; ++n) sc[k][n][0] = sc[k][n][1] = sc[k][n][2] = sc[k][n][3] = 0.f;
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
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        uint32_t kb[4];
        ldsm_x4(kb, kt + kofs[j & 1] + 64 * (j >> 1) + 16 * C::ROW8 * half);
        mma_e4m3(sc[0][2 * half], qf[j], kb[0], kb[1]);
        mma_e4m3(sc[0][2 * half + 1], qf[j], kb[2], kb[3]);
        mma_e4m3<-E4m3Round::Q_LO_EXP>(sc[1][2 * half], ql[j], kb[0], kb[1]);
        mma_e4m3<-E4m3Round::Q_LO_EXP>(sc[1][2 * half + 1], ql[j], kb[2], kb[3]);
      }
    }
  };

  mbar_wait(c.full(tile_of(0)), c.full_parity(tile_of(0)));
  phase_mark(0, PH_FIRST);
  qk_mma(c.base + c.kslot(tile_of(0)) * C::TILE);
  for (int s = 0; s < nsteps; ++s) {
    const bool more = s + 1 < nsteps;
    const int b = s & 1;
    float y[4][4], mx[2] = {-INFINITY, -INFINITY};
    const uint32_t bits = visible_bits<false, 4>((C::STEP * s + kh) * C::BN, t4, dm, 0, 0, span);
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = sc[0][n][e] + sc[1][n][e];
        y[n][e] = (bits >> (4 * n + e)) & 1 ? x * qt.scale[e >> 1] : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], y[n][e]);
      }
    if (C::STEP * s + kh < c.ntiles) mbar_arrive(k_empty(c, C::STEP * s + kh));  // its keys are in registers
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = quad_max(mx[h]);
      if (t4 == 0) xmax[(2 * b + kh) * C::BM + 16 * mq + 8 * h + g] = mx[h];
    }
    bar_named(C::BAR_PAIR + mq, 64);  // both tiles' maxima of the step are written
#pragma unroll
    for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], xmax[(2 * b + (kh ^ 1)) * C::BM + 16 * mq + 8 * h + g]);
    const int tn = tile_of(more ? s + 1 : s);
    if (more) mbar_wait(c.full(tn), c.full_parity(tn));
    // one basic block: step s + 1's MMAs (the last step re-reads its own tile, whose result is dropped) beside
    // step s's exponentials
    qk_mma(c.base + c.kslot(tn) * C::TILE);
    bool moved = false;
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)  // the same decision in both warps of the m-tile (the same two maxima)
      moved |= move_reference<E4m3Round>(mx[h], m_ref[h], alpha[h]);
    exp_rows(y, m_ref, alpha, l_part);
    // this warp's tile as one m16n8k32 A fragment: keys 0-15 (row g, row g + 8), keys 16-31
    uint32_t pk[4];
    pack_p_e4m3(y[0], y[1], pk[0], pk[1]);
    pack_p_e4m3(y[2], y[3], pk[2], pk[3]);
    const bool any_moved = __any_sync(0xffffffffu, moved);
    if (s >= 2) mbar_wait(c.p_empty(s), ((s >> 1) + 1) & 1);  // the PV group has read P(s - 2)
    st_shared_v4(c.base + C::O_PB + (((b * 2 + mq) * C::STEP + kh) * 32 + lane) * 16,
                 make_uint4(pk[0], pk[1], pk[2], pk[3]));
    if (kh == 0) publish_rescale(c, b, mq, lane, alpha, any_moved);
    mbar_arrive(c.p_full(s));
    if (s == 0) phase_mark(0, PH_TILE0);
  }
  phase_mark(0, PH_LOOP);
  publish_row_stats(c, m_ref, l_part, mq, lane, kh);  // the reference maxima (the same in both warps), each one's sums
  phase_mark(0, PH_DONE);
}

// The PV group of a prefix split (warps 4..7): loads the ring, multiplies P V into output columns 128 pw .. + 127
// of the 32 rows a 64-key step at a time, writes the partial rows in column order.
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
  int64_t pending[2] = {fetch(c.depth), fetch(c.depth + 1)};
  phase_mark(0, PH_PROLOGUE);

  // V fragments: matrix mi is keys 8 mi + (lane & 7), chunk 8 pw + cc at 8 pw + (cc ^ s), s = (lane >> 1) & 3
  const int s = e4m3::lane_swizzle(lane);
  const uint32_t vrow = (8 * (lane >> 3) + (lane & 7)) * C::ROW8 + 128 * pw;
  const int nsteps = (c.ntiles + C::STEP - 1) / C::STEP;
  float acc[2][16][4];  // [m-tile][n-tile 2 cc (even columns of chunk cc) / 2 cc + 1 (odd)][4]
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 16; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;

  for (int st = 0; st < nsteps; ++st) {
    const int b = st & 1, t0 = C::STEP * st;
    const bool two = t0 + 1 < c.ntiles;  // the step's second tile exists (warp-uniform)
    uint32_t vb[2][8][4];  // [tile][chunk cc] the B fragments of its even columns (0, 1) and odd columns (2, 3)
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
      if (kk == 0 || two) {
        mbar_wait(c.full(t0 + kk), c.full_parity(t0 + kk));  // the tile's V
        const uint32_t vt = c.base + c.kslot(t0 + kk) * C::TILE + vrow;
#pragma unroll
        for (int cc = 0; cc < 8; ++cc) {
          uint32_t r[4];  // keys 2 t4, 2 t4 + 1 of 8-key group i, columns 2 g, 2 g + 1 of the chunk (byte pairs)
          ldsm_x4_trans(r, vt + 16 * (cc ^ s));
          vb[kk][cc][0] = prmt(r[0], r[1], 0x6420u), vb[kk][cc][1] = prmt(r[2], r[3], 0x6420u);  // column 2 g
          vb[kk][cc][2] = prmt(r[0], r[1], 0x7531u), vb[kk][cc][3] = prmt(r[2], r[3], 0x7531u);  // column 2 g + 1
        }
      }
    if (t0 + c.depth < c.ntiles) {  // the step's slots refilled with tiles t0 + depth (+ 1) before P(st) is in
      const bool both = t0 + 1 + c.depth < c.ntiles;
      mbar_wait(k_empty(c, t0), c.full_parity(t0));  // the QK warps hold the step's scores
      if (both) mbar_wait(k_empty(c, t0 + 1), c.full_parity(t0 + 1));
      bar_named(C::BAR_PV, C::PV_THREADS);  // every PV warp holds its fragments of the step's slots
      load_tile(t0 + c.depth, pending[0]);
      if (both) load_tile(t0 + 1 + c.depth, pending[1]);
      pending[0] = fetch(t0 + 2 + c.depth);
      pending[1] = fetch(t0 + 3 + c.depth);
    }
    acquire_p(c, st, acc, lane);
    if (st == 0) phase_mark(0, PH_FIRST);
    uint32_t pm[2][2][4];  // [m-tile][tile]
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const uint4 u = ld_shared_v4(c.base + C::O_PB + (((b * 2 + m) * C::STEP + kk) * 32 + lane) * 16);
        pm[m][kk][0] = u.x, pm[m][kk][1] = u.y, pm[m][kk][2] = u.z, pm[m][kk][3] = u.w;
      }
    if (st + 2 < nsteps) mbar_arrive(c.p_empty(st));  // P buffer b may take P(st + 2)
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
      if (kk == 0 || two) {
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int cc = 0; cc < 8; ++cc) {
            mma_e4m3(acc[m][2 * cc], pm[m][kk], vb[kk][cc][0], vb[kk][cc][1]);
            mma_e4m3(acc[m][2 * cc + 1], pm[m][kk], vb[kk][cc][2], vb[kk][cc][3]);
          }
      }
    if (st == 0) phase_mark(0, PH_TILE0);
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
  if (threadIdx.x == 0) {
    init_role_mbarriers<C>(c.mbar);
#pragma unroll
    for (int i = 0; i < C::SLOTS; ++i) mbar_init(c.mbar + 8 * (C::MB_KEMPTY + i), 2 * 32);  // a tile's two QK warps
  }
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
