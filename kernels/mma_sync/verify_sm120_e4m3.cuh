// The sm_120 kernel for fp8 pools on e4m3 tensor cores (impl cuda_sm120_e4m3): the second generation's 64-row CTA
// split by role (verify_sm120_roles.cuh), its prefix splits multiplied in e4m3 with mma.sync m16n8k32 and fp32
// accumulation. docs/performance.md ("e4m3 tensor cores on sm_120") has the design, its prediction and the
// measurements; docs/kernels.md the accuracy it trades.
//
// What is rounded: Q to two e4m3 terms once per call (the Q pass, e4m3_q_pass.cuh), each (token, head) row scaled
// by 448 / max|row| (the scale goes into the row's logit scale): the first is Q's e4m3 rounding, the second that of
// the rest times 2^4, multiplied with the block scale 2^-4, so Q is held to about 2^-8 of each value (one e4m3
// term, as SGLang's own fp8 kernel rounds Q, holds 2^-4: its error on the fp8 grid is almost all that); the second
// term is multiplied on the first E4M3_TWO_TERMS of Q's 18 32-dim steps only, the rest at one term's 2^-4 (its
// shared memory is the ring's fourth slot). K and V are
// the pool's e4m3 bytes as stored (k_scale, v_scale as for the exact paths). P is rounded to e4m3 with its reference
// 4 (log2) below the row maximum it was set from, so a row's largest P lies in [16, 256] and values down to 2^-10 of
// it stay normal (an unscaled P in [0, 1], as SGLang rounds it, keeps 2^-6). Sums, the softmax state and the output
// accumulate in fp32. The draft block (bf16 k_extend / v_extend) runs the second generation's exact bf16 path in its
// first form (CfgRoles: roles_qk, roles_pv, the softmax in the QK warps), in its own layout.
//
// A prefix CTA (CfgE4m3's layout): a ring of four 32-key tiles of 576 e4m3 bytes (18,432 B each), rows at 576 r
// with their 16-byte chunk c at c ^ ((r >> 1) & 3) (conflict-free ldmatrix), Q's second term on its first
// E4M3_SMEM_TERMS steps (22 KB), the P buffers of the second generation; the row statistics in a ring slot no tile
// uses once the QK group leaves its loop (RoleCtx::stats).
//   QK group, warps 0-3: warp q holds the first term's A fragments of m-tile q (rows 16 q .. + 15) over all 576
//     dims (72 registers, no partner swap) and the second's on steps E4M3_SMEM_TERMS .. E4M3_TWO_TERMS - 1 (12
//     registers), reading the rest from shared memory (one 16-byte load per such step); per tile 36 ldmatrix.x4
//     (each the B fragments of two 8-key n-tiles of one 32-dim step) and 128 MMAs; the softmax of its 16 rows x 32
//     keys; P packed as one m16n8k32 A fragment whose k order is the accumulator's (k 4 t4 + i is key 2 t4 + (i & 1)
//     + 8 (i >> 1) of each 16-key half), published through the second generation's P buffers and mbarriers.
//   PV group, warps 4-11: warp p owns output columns 64 p .. + 63 of the 64 rows; per tile and 16-column chunk one
//     ldmatrix.x4.trans (keys 0-7, 8-15, 16-23, 24-31 as byte pairs) and four prmt give the B fragments of the even
//     and odd columns in P's key order; 32 MMAs per tile. A PV warp takes tile t's V and the eight refill its slot
//     before they wait for P(t) (V first). The epilogue writes the interleaved columns back in order.
// 100,968 B of shared memory for a prefix CTA, launched for the draft block's CTA too. sm_120a issues the e4m3
// MMAs in their block-scaled form (ptx.cuh, mma_e4m3); a Hopper GPU runs this kernel with an f16 emulation of them,
// so its H200 times are not a card's: the timing library (KDT_E4M3_TIMING=1) issues what sm_120a issues
// (docs/performance.md, "e4m3 tensor cores on sm_120").
#pragma once
#include "../common/frame.cuh"
#include "e4m3_q_pass.cuh"
#include "e4m3_rows.cuh"
#include "roles_common.cuh"
#include "verify_sm120_roles.cuh"

namespace kdt {

// The last E4M3_ONE_TERM of Q's 18 32-dim steps multiply its first e4m3 term only (a step's second term is 4 of the QK
// warp's 144 MMAs a tile, and 2 KB of a CTA's shared memory or 4 of a QK lane's registers): the first
// E4M3_SMEM_TERMS steps' second terms in shared memory leave room for a fourth ring slot in 99 KB (with the row
// statistics in a ring slot no tile uses once the QK warps leave their loop, RoleCtx::stats), the next
// E4M3_REG_TERMS in 12 of the 15 registers sm_120a leaves the QK warps at 168: 4 steps in one term, a fresh draw's
// error 0.56-0.60 of SGLang's (7 steps, shared memory alone: 0.68-0.69, at the configuration gate's 0.7;
// docs/performance.md, "What bounds the e4m3 configuration")
constexpr int E4M3_ONE_TERM = 4, E4M3_TWO_TERMS = 18 - E4M3_ONE_TERM;
constexpr int E4M3_REG_TERMS = 3, E4M3_SMEM_TERMS = E4M3_TWO_TERMS - E4M3_REG_TERMS;

// A prefix CTA's layout (the draft block's CTA keeps the second generation's, CfgRoles): a ring of four 32-key e4m3
// tiles, Q's second e4m3 term on E4M3_SMEM_TERMS steps as each QK lane's A fragments, the P buffers, the mbarriers
// (the row statistics in a ring slot: RoleCtx::stats).
struct CfgE4m3 {
  static constexpr int BM = 64, BN = 32;                    // rows per CTA, keys per prefix tile
  static constexpr int QK_WARPS = CfgRoles::QK_WARPS, PV_WARPS = CfgRoles::PV_WARPS, THREADS = CfgRoles::THREADS;
  static constexpr int QK_THREADS = CfgRoles::QK_THREADS, PV_THREADS = CfgRoles::PV_THREADS;
  static constexpr int SLOTS = 4, DRAFT_PAIRS = CfgRoles::DRAFT_PAIRS;
  static constexpr int ROW8 = e4m3::ROW;                   // bytes per e4m3 key row (common/layout.cuh)
  static constexpr int TILE = BN * ROW8;                   // 18,432
  static_assert(ROW8 == D_QK && BN == e4m3::KEYS && TILE == e4m3::TILE, "the layout the host check decodes");
  static constexpr int RING = SLOTS * TILE;                // 73,728
  static constexpr int QLO = QK_WARPS * E4M3_SMEM_TERMS * 32 * 16;  // [warp][two-term step][lane] 16-byte A fragments
  static constexpr int PB = CfgRoles::PB, ALPHA = CfgRoles::ALPHA, FLAGS = CfgRoles::FLAGS, STATS = 0;
  static constexpr bool STATS_IN_RING = true;
  static constexpr int MB_FULL = 0, MB_PFULL = SLOTS, MB_PEMPTY = SLOTS + 2, MB_STATS = SLOTS + 4,
                       MBARS = (SLOTS + 5) * 8;
  static constexpr int O_QLO = RING, O_PB = O_QLO + QLO, O_ALPHA = O_PB + PB, O_FLAGS = O_ALPHA + ALPHA,
                       O_STATS = O_FLAGS + FLAGS, O_MBAR = O_STATS + STATS;
  static constexpr int SMEM = O_MBAR + MBARS;
  static constexpr int BAR_PV = CfgRoles::BAR_PV;
  // setmaxnreg: the QK warps fit Q's first term and three second terms in 168 (no spill on sm_120a), fewer than the
  // draft block's 184, and the PV warps need more than its 160 (sm_120a kept a full-barrier address in local memory at
  // 160); the phase clocks' stamps (KDT_PHASE_CLOCKS) take the QK warps' registers instead (16 B of stack at 168, none
  // at 176 or 184 with 160 for the PV warps): there the draft block's split, a phase library's times being its own
#if defined(KDT_PHASE_CLOCKS)
  static constexpr int QK_REGS = CfgRoles::QK_REGS, PV_REGS = CfgRoles::PV_REGS;
#else
  static constexpr int QK_REGS = 168, PV_REGS = 168;
#endif
  static_assert(QK_THREADS * QK_REGS + PV_THREADS * PV_REGS <= THREADS * CfgRoles::LAUNCH_REGS,
                "setmaxnreg.inc would wait forever for registers the launch did not allocate");
  static_assert(O_MBAR % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(SMEM <= 101376, "sm_120 allows 99 KB of dynamic shared memory per block");
};

static_assert(Q8_ROWS_ALIGN % CfgE4m3::BM == 0, "every m-tile a CTA loads is in the Q pass's rows");

using E4m3Ctx = RoleCtx<CfgE4m3>;  // a prefix CTA's work, shared memory and ring (roles_common.cuh)


// The QK group of a prefix split (warps 0..3): Q of m-tile q to e4m3 in registers, then per tile the scores of its
// 16 rows x 32 keys over 576 dims, software-pipelined as in roles_qk (tile t + 1's MMAs beside tile t's softmax).
__device__ __forceinline__ void e4m3_qk(const E4m3Ctx& c) {
  using C = CfgE4m3;
  using E = CfgE4m3;
  const Params& p = c.p;
  const Work& w = c.w;
  const int lane = threadIdx.x & 31, q = threadIdx.x >> 5, t4 = lane & 3;
  // the Q prologue: m-tile q's terms as the Q pass wrote them (e4m3_q_pass.cuh), once it is done: the second's A
  // fragments copied to this lane's shared slots for the tile loop (cp.async), the first's into registers
  pdl_wait();
  const Q8Tile qt(p, w, q, lane);
  const float scale[2] = {qt.scale[0], qt.scale[1]};
  uint32_t qf[18][4];  // [32-dim step][A register]: Q's first term, rows g / g + 8, dims 4 t4 .. / 16 + 4 t4 ..
  uint32_t qr[E4M3_REG_TERMS][4];  // the second term of steps E4M3_SMEM_TERMS .. E4M3_TWO_TERMS - 1
  const uint32_t qlo = c.base + C::O_QLO + (q * E4M3_SMEM_TERMS * 32 + lane) * 16;  // + 512 j: step j's second term
#pragma unroll
  for (int j = 0; j < E4M3_SMEM_TERMS; ++j) cp_async_16s(qlo + 512 * j, qt.src(1, j), 16);  // read back by this lane
  cp_async_commit();
#pragma unroll
  for (int j = 0; j < 18; ++j) qt.load(0, j, qf[j]);
#pragma unroll
  for (int j = 0; j < E4M3_REG_TERMS; ++j) qt.load(1, E4M3_SMEM_TERMS + j, qr[j]);
  cp_async_wait<0>();
  phase_mark(0, PH_PROLOGUE);

  // K fragments (common/layout.cuh, e4m3::k_frag_base): two bases by the parity of the 32-dim step, the rest
  // immediates (64 (j >> 1), and 16 rows for the second 16-key half)
  const uint32_t kofs[2] = {e4m3::k_frag_base(lane, 0), e4m3::k_frag_base(lane, 1)};
  constexpr int DEPTH = C::SLOTS;
  auto kslot = [](int t) { return t % C::SLOTS; };
  auto full = [&](int t) { return c.mbar + 8 * (C::MB_FULL + kslot(t)); };
  auto parity = [](int t) -> uint32_t { return (t / DEPTH) & 1; };
  const DraftMask dm = draft_mask(p, w);
  const int span = w.kend - w.kbeg;
  float m_ref[2] = {-INFINITY, -INFINITY}, l_part[2] = {0.f, 0.f};

  auto qk_mma = [&](uint32_t kt, float (&sc)[4][4]) {
#pragma unroll
    for (int n = 0; n < 4; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#if defined(KDT_E4M3_EMULATED)
    // where e4m3 MMAs are emulated (sm_90), Q must stay e4m3 in registers: an f16 copy hoisted out of the tile loop
    // would need 144 registers and spill (no instruction is emitted)
#pragma unroll
    for (int j = 0; j < 18; ++j) asm volatile("" : "+r"(qf[j][0]), "+r"(qf[j][1]), "+r"(qf[j][2]), "+r"(qf[j][3]));
#pragma unroll
    for (int j = 0; j < E4M3_REG_TERMS; ++j)
      asm volatile("" : "+r"(qr[j][0]), "+r"(qr[j][1]), "+r"(qr[j][2]), "+r"(qr[j][3]));
#endif
#pragma unroll
    for (int j = 0; j < 18; ++j) {
      uint32_t ql[4] = {0u, 0u, 0u, 0u};
      if (j < E4M3_SMEM_TERMS) {
        const uint4 u = ld_shared_v4(qlo + 512 * j);
        ql[0] = u.x, ql[1] = u.y, ql[2] = u.z, ql[3] = u.w;
      } else if (j < E4M3_TWO_TERMS) {
        ql[0] = qr[j - E4M3_SMEM_TERMS][0], ql[1] = qr[j - E4M3_SMEM_TERMS][1];
        ql[2] = qr[j - E4M3_SMEM_TERMS][2], ql[3] = qr[j - E4M3_SMEM_TERMS][3];
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        uint32_t kb[4];
        ldsm_x4(kb, kt + kofs[j & 1] + 64 * (j >> 1) + 16 * E::ROW8 * half);
        mma_e4m3(sc[2 * half], qf[j], kb[0], kb[1]);
        mma_e4m3(sc[2 * half + 1], qf[j], kb[2], kb[3]);
        if (j < E4M3_TWO_TERMS) {
          mma_e4m3<-E4m3Round::Q_LO_EXP>(sc[2 * half], ql, kb[0], kb[1]);
          mma_e4m3<-E4m3Round::Q_LO_EXP>(sc[2 * half + 1], ql, kb[2], kb[3]);
        }
      }
    }
  };

  float sc[4][4], x[4][4];
  mbar_wait(full(0), parity(0));
  phase_mark(0, PH_FIRST);
  qk_mma(c.base + kslot(0) * C::TILE, sc);
  for (int t = 0; t < c.ntiles; ++t) {
    const bool more = t + 1 < c.ntiles;
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) x[n][e] = sc[n][e];
    if (more) mbar_wait(full(t + 1), parity(t + 1));
    const uint32_t bits = visible_bits<false, 4>(t * E::BN, t4, dm, 0, 0, span);
    // one basic block: tile t + 1's MMAs (the last iteration re-reads tile t, whose result is dropped) beside tile
    // t's softmax
    qk_mma(c.base + kslot(more ? t + 1 : t) * C::TILE, sc);
    uint32_t pk[1][4];
    float alpha[2];
    float y[4][4];
    const bool moved = softmax_rows<E4m3Round>(x, bits, scale, m_ref, l_part, y, alpha);
    pack_p_e4m3(y[0], y[1], pk[0][0], pk[0][1]);  // keys 0-15, then 16-31 (e4m3_rows.cuh)
    pack_p_e4m3(y[2], y[3], pk[0][2], pk[0][3]);
    publish_p<C, 1>(c, t, q, lane, pk, alpha, __any_sync(0xffffffffu, moved));
    if (t == 0) phase_mark(0, PH_TILE0);
  }
  phase_mark(0, PH_LOOP);
  publish_row_stats(c, m_ref, l_part, q, lane);
  phase_mark(0, PH_DONE);
}

// The PV group of a prefix split (warps 4..11): loads the ring with e4m3 tiles, multiplies P V on e4m3 tensor cores
// into output columns 64 pw .. + 63 of the 64 rows, writes the partial rows in column order.
__device__ __forceinline__ void e4m3_pv(const E4m3Ctx& c) {
  using C = CfgE4m3;
  using E = CfgE4m3;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, pw = (tid >> 5) - C::QK_WARPS, v = tid - C::QK_THREADS;
  // loads: this thread moves 16-byte chunks lch + 8 k (k < 5, chunk < 36) of key row lrow of a tile
  const int lrow = v >> 3, lch = v & 7;
  const unsigned char* kb8 = reinterpret_cast<const unsigned char*>(p.kb);
  auto fetch = [&](int t) -> int64_t {
    const int key = w.kbeg + t * E::BN + lrow;
    return key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
  };
  auto load_tile = [&](int t, int64_t raw) {
    const bool ok = w.kbeg + t * E::BN + lrow < w.kend;
    const int64_t slot = ok ? checked_slot(p, raw, lch == 0) : 0;
    const unsigned char* src = kb8 + slot * p.kb_s;
    const uint32_t d = c.base + c.kslot(t) * C::TILE;
#pragma unroll
    for (int k = 0; k < 5; ++k) {
      const int ch = lch + 8 * k;
      if (k < 4 || lch < 4) cp_async_16s(d + e4m3::tile_offset(lrow, ch), src + 16 * ch, ok ? 16 : 0);
    }
    cp_async_mbar_arrive(c.full(t));
  };
  for (int t = 0; t < c.depth && t < c.ntiles; ++t) load_tile(t, fetch(t));
  int64_t pending = fetch(c.depth);
  phase_mark(0, PH_PROLOGUE);

  // V fragments: matrix mi is keys 8 mi + (lane & 7), chunk 4 pw + cc at 4 pw + (cc ^ s), s = (lane >> 1) & 3
  const int s = e4m3::lane_swizzle(lane);
  const uint32_t vrow = e4m3::v_frag_row(lane, pw);
  float acc[4][8][4];  // [m-tile][n-tile 2 cc (even columns of chunk cc) / 2 cc + 1 (odd)][4]
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;

  for (int t = 0; t < c.ntiles; ++t) {
    const int b = t & 1;
    // V before P: tile t's slot may be refilled once every PV warp holds its V and P(t - 1) is in, since the QK
    // group read tile t's K (its MMAs beside tile t - 1's softmax) before it published P(t - 1); only tile 0's K is
    // read after that, so the first iteration waits for P(0) first
    if (t == 0) acquire_p(c, t, acc, lane);
    if (t == 0) phase_mark(0, PH_FIRST);
    mbar_wait(c.full(t), c.full_parity(t));  // the tile's V (complete: the QK group waited on it)
    // all of this warp's V fragments of the tile first (16 registers), so the slot is refilled before the MMAs
    // rather than after them: the refill then has the whole PV step of lead (the QK warps waited on late refills)
    const uint32_t vt = c.base + c.kslot(t) * C::TILE + vrow;
    uint32_t vb[4][4];  // [chunk cc] the B fragments of its even columns (0, 1) and odd columns (2, 3)
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      uint32_t r[4];  // keys 2 t4, 2 t4 + 1 of 8-key group i, columns 2 g, 2 g + 1 of the chunk (byte pairs)
      ldsm_x4_trans(r, vt + 16 * (cc ^ s));
      vb[cc][0] = prmt(r[0], r[1], 0x6420u), vb[cc][1] = prmt(r[2], r[3], 0x6420u);  // column 2 g
      vb[cc][2] = prmt(r[0], r[1], 0x7531u), vb[cc][3] = prmt(r[2], r[3], 0x7531u);  // column 2 g + 1
    }
    if (t + c.depth < c.ntiles) {
      bar_named(C::BAR_PV, C::PV_THREADS);  // every PV warp holds its fragments of this slot (the QK group is done
      load_tile(t + c.depth, pending);      // with it: P(t - 1) came after its scores)
      pending = fetch(t + c.depth + 1);
    }
    if (t > 0) acquire_p(c, t, acc, lane);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      // P of m-tile m (one 16-byte load; emulated e4m3 MMAs (sm_90) take their f16 copies per m-tile)
      const uint4 u = ld_shared_v4(c.base + C::O_PB + p_frag<1>(b, 0, m, lane));
      const uint32_t pm[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
        mma_e4m3(acc[m][2 * cc], pm, vb[cc][0], vb[cc][1]);
        mma_e4m3(acc[m][2 * cc + 1], pm, vb[cc][2], vb[cc][3]);
      }
    }
    if (t + 2 < c.ntiles) mbar_arrive(c.p_empty(t));  // P buffer b may take P(t + 2)
    if (t == 0) phase_mark(0, PH_TILE0);
  }
  cp_async_wait<0>();
  phase_mark(0, PH_LOOP);

  write_partial_rows_e4m3<C, 4, 1>(c, acc, pw, lane);  // e4m3_rows.cuh
  phase_mark(0, PH_DONE);
}

template <int BM>
__global__ void __launch_bounds__(CfgRoles::THREADS, 1) verify_sm120_e4m3_kernel(Params p) {
  using C = CfgRoles;
  static_assert(BM == C::BM && BM == CfgE4m3::BM, "64-row tiles");
  extern __shared__ __align__(128) unsigned char smem[];
  phase_mark(0, PH_ENTRY);
  Work w;
  if (!setup_work<BM, C::THREADS>(p, CfgE4m3::BN, w)) return;
  phase_mark(0, PH_WORK);
  const uint32_t base = smem_u32(smem);
  if (w.draft) {  // the draft block: the second generation's bf16 path, its layout and 16-key tiles
    const RolesCtx c{p, w, base, base + C::O_MBAR, (w.kend - w.kbeg + C::BN - 1) / C::BN, C::DRAFT_PAIRS};
    phase_meta(c.ntiles, true);
    if (threadIdx.x == 0) init_role_mbarriers<C>(c.mbar);
    __syncthreads();
    phase_mark(0, PH_READY);
    if (threadIdx.x >= C::QK_THREADS) {
      regs_dec<C::PV_REGS>();
      roles_pv(c);
    } else {
      regs_inc<C::QK_REGS>();
      roles_qk<true>(c);
    }
    phase_mark(0, PH_DONE);
    return;
  }
  using E = CfgE4m3;
  const E4m3Ctx c{p, w, base, base + E::O_MBAR, (w.kend - w.kbeg + E::BN - 1) / E::BN, E::SLOTS};
  phase_meta(c.ntiles, false);
  if (threadIdx.x == 0) init_role_mbarriers<E>(c.mbar);
  __syncthreads();
  phase_mark(0, PH_READY);
  if (threadIdx.x >= E::QK_THREADS) {
    regs_dec<E::PV_REGS>();
    e4m3_pv(c);
  } else {
    regs_inc<E::QK_REGS>();
    e4m3_qk(c);
  }
}

constexpr ConfigEntry sm120_e4m3_entry() {
  return ConfigEntry{CfgRoles::BM, CfgRoles::SLOTS, CfgRoles::THREADS,
                     CfgE4m3::SMEM > CfgRoles::SMEM ? CfgE4m3::SMEM : CfgRoles::SMEM, CfgE4m3::BN,
                     "verify_sm120_e4m3_kernel<64>", &verify_sm120_e4m3_kernel<CfgRoles::BM>, ARCH_MMA_SYNC,
                     KV_FP8_BIT, 1, true};  // one CTA a row tile; after the Q pass
}

}  // namespace kdt
