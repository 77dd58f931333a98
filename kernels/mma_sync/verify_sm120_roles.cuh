// The sm_120 kernel, second generation (impl cuda_sm120_roles): one 64-row CTA whose warps split the step by role,
// mma.sync m16n8k16 within sm_120's 99 KB and 255 registers. docs/performance.md ("The sm_120 kernel, second
// generation") has the design, its prediction and the measurements.
//
// Two forms live here. The first (CfgRoles; roles_qk, roles_pv), described next, gives the QK warps the softmax; it
// is the code the e4m3 configuration's draft block runs (verify_sm120_e4m3.cuh). The kernel itself runs the second
// (CfgPvs, below "The role split with the softmax in the PV group"; since 2026-12-05), whose QK warps only multiply.
//
// Why roles: the first sm_120 kernel (verify_sm120.cuh) holds 32 rows per CTA, so four CTAs read each KV byte of a
// 128-row call out of L2, and every warp runs the whole serial step behind block barriers. A 64-row CTA cannot hold
// both Q (18,432 registers) and O (32,768) in every warp, nor Q beside a KV ring in 99 KB; split by role it fits:
//   warps 0-3 (QK group): warp q holds the A fragments of rows 32 (q >> 1) .. + 31 over latent dims 256 (q & 1) ..
//     + 239 in registers (120 registers; Q's 64 rope dims and each half's last 16 latent dims sit in shared memory,
//     12 KB), computes the partial S of those 32 rows x 16 keys over its dims plus 32 rope dims, swaps one 16-row
//     half with its partner warp q ^ 1 through shared memory, and finishes the softmax of m-tile q (rows 16q ..
//     16q + 15) in registers: mask, scale, row maximum over the quad, the lazy reference maximum (RESCALE_SLACK),
//     P in bf16 as the m16n8k16 A fragment (the S accumulator layout is the A layout: one 16-byte store per lane),
//     with the rows' rescale factors when any row moved. Software-pipelined: tile t + 1's MMAs are in one basic
//     block with tile t's softmax arithmetic.
//   warps 4-11 (PV group): warp p owns output columns 64p .. 64p + 63 of all 64 rows (128 fp32 accumulators per
//     thread); per tile it reads the four P fragments (16-byte loads), V fragments by ldmatrix.trans from the same
//     KV tile (each serves four m-tiles), and refills the tile's ring slot once all eight are done with it.
// The KV ring: four 16-key tiles (18 KB each, rows XOR-swizzled by (row & 7)), loaded by the PV warps with
// cp.async four tiles ahead; one mbarrier per slot is completed by cp.async.mbarrier.arrive. Every hand-off between
// the groups is an mbarrier (arrive releases, wait acquires): P in two buffers (P_FULL, P_EMPTY), so the QK group
// runs up to two tiles ahead of the PV group, and the row statistics for the epilogue. Named barriers only where
// all their threads run the same code. setmaxnreg: QK 184, PV 160 registers, balanced in the pool the launch
// allocates. The draft-block CTA uses the ring as two (K, V) slot pairs (V from v_extend).
// 99,432 B of shared memory; every instruction is one sm_120a has (mma.sync, ldmatrix, cp.async, mbarrier
// try_wait, setmaxnreg, named barriers), so a Hopper GPU runs it as sm_120 would. bf16 pools only: an fp8 pool
// runs the first kernel's e4m3 variant (kdtree_verify.cu). What this kernel and the e4m3 configuration share (the
// context, the mbarriers, the m-tile softmax, the P hand-off, the PV MMAs, the epilogue) is in roles_common.cuh.
#pragma once
#include "../common/frame.cuh"
#include "roles_common.cuh"

namespace kdt {

struct CfgRoles {
  static constexpr int BM = 64, BN = 16;                     // rows per CTA, keys per tile
  static constexpr int QK_WARPS = 4, PV_WARPS = 8, THREADS = (QK_WARPS + PV_WARPS) * 32;
  static constexpr int QK_THREADS = QK_WARPS * 32, PV_THREADS = PV_WARPS * 32;
  static constexpr int SLOTS = 4;                            // ring slots of one 16-key tile
  static constexpr int DRAFT_PAIRS = 2;                      // the draft block's (K, V) slot pairs
  static constexpr int ROW = D_QK * 2;                       // bytes per swizzled key row
  static constexpr int TILE = BN * ROW;                      // 18,432
  static constexpr int RING = SLOTS * TILE;                  // 73,728
  static constexpr int ROPE = BM * 64 * 2;                   // Q's rope dims, 128-byte rows, swizzled
  static constexpr int QTAIL = BM * 32 * 2;                  // Q's last 16 latent dims of each half (k16 step 15)
  static constexpr int SX = 2 * 4 * 32 * 8 * 4;              // partial-S swap: 2 buffers x 4 m-tiles x 32 lanes x 8
  static constexpr int PB = 2 * 4 * 32 * 16;                 // P A fragments: 2 buffers x 4 m-tiles x 32 lanes x 16 B
  static constexpr int ALPHA = 2 * BM * 4;                   // rescale factors: 2 buffers x 64 rows
  static constexpr int FLAGS = 2 * 4 * 4;                    // per buffer and m-tile: some row's factor is not 1
  static constexpr int STATS = 2 * BM * 4;                   // final row max and sum
  // mbarriers: FULL[4] (a ring slot's tile landed), P_FULL[2] (P buffer written), P_EMPTY[2] (P buffer read),
  // STATS (the row statistics written)
  static constexpr int MB_FULL = 0, MB_PFULL = SLOTS, MB_PEMPTY = SLOTS + 2, MB_STATS = SLOTS + 4,
                       MBARS = (SLOTS + 5) * 8;
  static constexpr int O_ROPE = RING, O_QTAIL = O_ROPE + ROPE, O_SX = O_QTAIL + QTAIL, O_PB = O_SX + SX, O_ALPHA = O_PB + PB,
                       O_FLAGS = O_ALPHA + ALPHA, O_STATS = O_FLAGS + FLAGS, O_MBAR = O_STATS + STATS;
  static constexpr int SMEM = O_MBAR + MBARS;
  static_assert(O_MBAR % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(SMEM <= 101376, "sm_120 allows 99 KB of dynamic shared memory per block");
  // registers per thread after setmaxnreg: 65,536 / 384 = 170 at launch (168 allocated); the QK warps hold Q and,
  // software-pipelined, one tile's scores beside the next tile's accumulators
  // setmaxnreg.inc waits until the CTA's pool has the registers: the pool is what the launch allocated
  // (65,536 / 384 threads, in multiples of 8: 168 each), not the register file, so the two sides must balance in it
  static constexpr int LAUNCH_REGS = (65536 / THREADS) / 8 * 8;
  static constexpr int PV_REGS = 160, QK_REGS = 184;
  static_assert(QK_THREADS * QK_REGS + PV_THREADS * PV_REGS <= THREADS * LAUNCH_REGS,
                "setmaxnreg.inc would wait forever for registers the launch did not allocate");
  // named barriers (0 is __syncthreads), each reached by all its threads from the same code: the partner pairs'
  // swap, the PV group, the QK group. Hand-offs between the groups are mbarriers (arrive releases, wait acquires).
  static constexpr int BAR_PAIR = 1, BAR_PV = 3, BAR_QK = 4;
};

using RolesCtx = RoleCtx<CfgRoles>;  // the CTA's work, shared memory and ring (roles_common.cuh)

// The PV group (warps 4..11): loads the ring, multiplies P V into the output columns 64 pw .. 64 pw + 63 of all 64
// rows, writes the partial rows.
__device__ __forceinline__ void roles_pv(const RolesCtx& c) {
  using C = CfgRoles;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, pw = (tid >> 5) - C::QK_WARPS, v = tid - C::QK_THREADS;
  const int mi = lane >> 3, sw = lane & 7;
  // loads: this thread moves 16-byte chunks sub + 16k of key row lrow of a tile
  const int lrow = v >> 4, sub = v & 15;
  const uint32_t ldst = lrow * C::ROW + ((sub ^ (lrow & 7)) << 4);
  auto fetch = [&](int t) -> int64_t {
    const int key = w.kbeg + t * C::BN + lrow;
    return !w.draft && key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
  };
  auto load_tile = [&](int t, int64_t raw) {
    const int key = w.kbeg + t * C::BN + lrow;
    const bool ok = key < w.kend;
    const uint32_t kd = c.base + c.kslot(t) * C::TILE + ldst;
    const char* ksrc;
    if (w.draft) {
      ksrc = reinterpret_cast<const char*>(p.kx + (w.tok0 + (ok ? key : 0)) * p.kx_s) + sub * 16;
      const char* vsrc = reinterpret_cast<const char*>(p.vx + (w.tok0 + (ok ? key : 0)) * p.vx_s) + sub * 16;
      const uint32_t vd = c.base + c.vslot(t) * C::TILE + ldst;
#pragma unroll
      for (int k = 0; k < 4; ++k) cp_async_16s(vd + 256 * k, vsrc + 256 * k, ok ? 16 : 0);
    } else {
      const int64_t slot = ok ? checked_slot(p, raw, sub == 0) : 0;
      ksrc = reinterpret_cast<const char*>(p.kb + slot * p.kb_s) + sub * 16;
    }
#pragma unroll
    for (int k = 0; k < 5; ++k)
      if (k < 4 || sub < 8) cp_async_16s(kd + 256 * k, ksrc + 256 * k, ok ? 16 : 0);
    cp_async_mbar_arrive(c.full(t));
  };
  for (int t = 0; t < c.depth && t < c.ntiles; ++t) load_tile(t, fetch(t));
  int64_t pending = fetch(c.depth);
  phase_mark(0, PH_PROLOGUE);

  // V fragments: keys (mi & 1) * 8 + (lane & 7), 16-byte chunk 8 pw + 2 np + (mi >> 1) at (2 np + (mi >> 1)) ^ sw
  // within its 128-byte group: one base XOR-ed with np << 5 (as the QK side's K offsets)
  const uint32_t vofs0 = ((mi & 1) * 8 + (lane & 7)) * C::ROW + 128 * pw + ((((mi >> 1) ^ (sw & 1))) << 4) +
                         ((sw >> 1) << 5);
  float acc[4][8][4];
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;

  for (int t = 0; t < c.ntiles; ++t) {
    const int b = t & 1;
    acquire_p(c, t, acc, lane);
    if (t == 0) phase_mark(0, PH_FIRST);
    uint32_t pa[4][4];
    load_p<1>(c.base + C::O_PB, b, 0, lane, pa);
    mbar_wait(c.full(t), c.full_parity(t));  // the tile's V (complete: the QK group waited on it)
    const uint32_t vt = c.base + c.vslot(t) * C::TILE;
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t vb[4];
      ldsm_x4_trans(vb, vt + (vofs0 ^ (uint32_t)(np << 5)));
      pv_mma(acc, pa, vb, np);
    }
    if (t + 2 < c.ntiles) mbar_arrive(c.p_empty(t));  // P buffer b may take P(t + 2)
    if (t + c.depth < c.ntiles) {
      bar_named(C::BAR_PV, C::PV_THREADS);  // all PV warps are done with this tile's slots
      load_tile(t + c.depth, pending);
      pending = fetch(t + c.depth + 1);
    }
    if (t == 0) phase_mark(0, PH_TILE0);
  }
  cp_async_wait<0>();
  phase_mark(0, PH_LOOP);
  write_partial_rows<false>(c, acc, pw == 0 && (lane & 3) == 0, 64 * pw, lane);
}

// The QK group (warps 0..3), software-pipelined: tile t + 1's QK MMAs are issued in the same basic block as tile
// t's softmax arithmetic, so the warp's scheduler fills the MMA dependency stalls with the softmax, then P(t) is
// published and tile t + 1's partial scores are swapped with the partner warp. DRAFT: the draft block, masked by the
// tree (custom_mask) or causally; else a prefix split, masked only past its end.
template <bool DRAFT>
__device__ __forceinline__ void roles_qk(const RolesCtx& c) {
  using C = CfgRoles;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, q = tid >> 5, rh = q >> 1, dh = q & 1;
  const int g = lane >> 2, t4 = lane & 3, mi = lane >> 3, sw = lane & 7;
  // Q's rope dims of the 64 rows -> shared memory (128-byte rows, chunk c at c ^ (row & 7)); latent A fragments of
  // this warp's rows and dims -> registers, straight from global memory. Rows past the request's are zeros.
  for (int idx = tid; idx < C::BM * 8; idx += C::QK_THREADS) {
    const int r = idx >> 3, ch = idx & 7;
    const __nv_bfloat16* src = q_row(p, w, r);
    cp_async_16s(c.base + C::O_ROPE + r * 128 + ((ch ^ (r & 7)) << 4), src ? src + D_V + 8 * ch : p.q,
                 src ? 16 : 0);
  }
  // the latent tail (k16 step 15 of each dim half: dims 256 h + 240 .. + 255, 16-byte chunk 2 h + half) -> shared
  // memory, two rows per 128-byte line: row r, chunk c at line r >> 1, position ((r & 1) * 4 + c) ^ ((r >> 1) & 7)
  for (int idx = tid; idx < C::BM * 4; idx += C::QK_THREADS) {
    const int r = idx >> 2, ch = idx & 3;
    const __nv_bfloat16* src = q_row(p, w, r);
    cp_async_16s(c.base + C::O_QTAIL + line_pair_offset(r, ch), src ? src + 256 * (ch >> 1) + 240 + 8 * (ch & 1) : p.q,
                 src ? 16 : 0);
  }
  cp_async_commit();
  uint32_t qf[15][2][4];  // [k16 step of 256 latent dims, but the last][m-tile of the row half][A register]
  // this lane's rows 32 rh + 16 m + 8 h + g at dim 256 dh + 2 t4; the rest of each address is an immediate
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_bfloat16* row = q_row(p, w, 32 * rh + 16 * m + 8 * h + g);
      const __nv_bfloat16* at = row ? row + 256 * dh + 2 * t4 : nullptr;
#pragma unroll
      for (int kk = 0; kk < 15; ++kk)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) qf[kk][m][h + 2 * hi] = at ? ld_global_nc_u32(at + 16 * kk + 8 * hi) : 0u;
    }
  cp_async_wait<0>();
  bar_named(C::BAR_QK, C::QK_THREADS);  // the rope tile is visible to the QK warps
  phase_mark(0, PH_PROLOGUE);

  // K fragments: keys (mi >> 1) * 8 + (lane & 7) of the tile, 16-byte chunk 2 jj + (mi & 1) of a 64-dim group at
  // (2 jj + (mi & 1)) ^ sw. With sw = 2 s1 + s0 that is 2 (jj ^ s1) + ((mi & 1) ^ s0): one base, XOR-ed with jj << 5
  // (bits 5-6; a key row is 9 x 128 bytes). Likewise the rope A fragments (row 32 rh + (lane & 15), chunk
  // 2 (2 dh + j) + (lane >> 4)) are one base XOR-ed with j << 5, m-tile 1 at +2 KB.
  const uint32_t kofs0 = ((mi >> 1) * 8 + (lane & 7)) * C::ROW + (((mi & 1) ^ (sw & 1)) << 4) + ((sw >> 1) << 5);
  auto kofs = [&](int jj) { return kofs0 ^ (uint32_t)(jj << 5); };
  const uint32_t rope0 = (32 * rh + (lane & 15)) * 128 + ((((4 * dh + (lane >> 4))) ^ sw) << 4);
  auto rope_a = [&](int j) { return c.base + C::O_ROPE + (rope0 ^ (uint32_t)(j << 5)); };
  const uint32_t tail_a = c.base + C::O_QTAIL + line_pair_offset(32 * rh + (lane & 15), 2 * dh + (lane >> 4));
  // the ring as this instantiation knows it at compile time (RolesCtx answers the same at run time)
  constexpr int DEPTH = DRAFT ? 2 : C::SLOTS;
  auto kslot = [](int t) { return DRAFT ? 2 * (t & 1) : t & (C::SLOTS - 1); };
  auto full = [&](int t) { return c.mbar + 8 * (C::MB_FULL + kslot(t)); };
  auto parity = [](int t) -> uint32_t { return (t / DEPTH) & 1; };
  const DraftMask dm = draft_mask(p, w);
  const int node0 = node_head(w.row0 + 16 * q + g, p.H).x, node1 = node_head(w.row0 + 16 * q + 8 + g, p.H).x;
  const int span = w.kend - w.kbeg;  // keys of this split (the draft block: kbeg = 0)
  const float scale = DRAFT ? p.scale_draft : p.scale_pre;
  float m_ref[2] = {-INFINITY, -INFINITY}, l_part[2] = {0.f, 0.f};

  // QK of the tile in slot kt: partial S of m-tiles 2 rh, 2 rh + 1 x 16 keys over this warp's dims
  auto qk_mma = [&](uint32_t kt, float (&s)[2][2][4]) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      uint32_t kb[4];
      ldsm_x4(kb, kt + kofs(kk & 3) + 128 * (4 * dh + (kk >> 2)));
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        if (kk < 15) {
          mma_bf16(s[m][0], qf[kk < 15 ? kk : 0][m], kb[0], kb[1]);
          mma_bf16(s[m][1], qf[kk < 15 ? kk : 0][m], kb[2], kb[3]);
        } else {  // the latent tail's A fragments from shared memory (m-tile 1: 16 rows = 8 lines further)
          uint32_t qa[4];
          ldsm_x4(qa, tail_a + 1024 * m);
          mma_bf16(s[m][0], qa, kb[0], kb[1]);
          mma_bf16(s[m][1], qa, kb[2], kb[3]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      uint32_t kb[4];
      ldsm_x4(kb, kt + kofs(2 * dh + j) + 128 * 8);  // rope dims 512 + 32 dh + 16 j
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        uint32_t qa[4];
        ldsm_x4(qa, rope_a(j) + 2048 * m);
        mma_bf16(s[m][0], qa, kb[0], kb[1]);
        mma_bf16(s[m][1], qa, kb[2], kb[3]);
      }
    }
  };
  // the swap: m-tile (dh ^ 1) of the row half goes to the partner, which finishes it; ours comes back, summed
  auto swap = [&](int t, const float (&s)[2][2][4], float (&x)[2][4]) {
    const uint32_t out = c.base + C::O_SX + (((t & 1) * 4 + (q ^ 1)) * 32 + lane) * 32;
    const uint32_t in = c.base + C::O_SX + (((t & 1) * 4 + q) * 32 + lane) * 32;
    float give[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        give[n][e] = dh ? s[0][n][e] : s[1][n][e];
        x[n][e] = dh ? s[1][n][e] : s[0][n][e];
      }
    st_shared_v4(out, make_uint4(__float_as_uint(give[0][0]), __float_as_uint(give[0][1]), __float_as_uint(give[0][2]),
                                 __float_as_uint(give[0][3])));
    st_shared_v4(out + 16, make_uint4(__float_as_uint(give[1][0]), __float_as_uint(give[1][1]),
                                      __float_as_uint(give[1][2]), __float_as_uint(give[1][3])));
    bar_named(C::BAR_PAIR + rh, 64);
    const uint4 u0 = ld_shared_v4(in), u1 = ld_shared_v4(in + 16);
    x[0][0] += __uint_as_float(u0.x);
    x[0][1] += __uint_as_float(u0.y);
    x[0][2] += __uint_as_float(u0.z);
    x[0][3] += __uint_as_float(u0.w);
    x[1][0] += __uint_as_float(u1.x);
    x[1][1] += __uint_as_float(u1.y);
    x[1][2] += __uint_as_float(u1.z);
    x[1][3] += __uint_as_float(u1.w);
  };

  float s[2][2][4], x[2][4];
  mbar_wait(full(0), parity(0));
  phase_mark(0, PH_FIRST);
  qk_mma(c.base + kslot(0) * C::TILE, s);
  swap(0, s, x);
  for (int t = 0; t < c.ntiles; ++t) {
    const bool more = t + 1 < c.ntiles;
    if (more) mbar_wait(full(t + 1), parity(t + 1));
    // the draft block's tree mask (loads) before the MMAs; a prefix tile's mask is a compare, inside the block
    const uint32_t bits = visible_bits<DRAFT, 2>(t * C::BN, t4, dm, node0, node1, span);
    // one basic block: tile t + 1's MMAs (the last iteration re-reads tile t, whose result is dropped) beside tile
    // t's softmax
    qk_mma(c.base + kslot(more ? t + 1 : t) * C::TILE, s);
    uint32_t pk[1][4];
    float alpha[2];
    const bool moved = softmax_tile(x, bits, scale, m_ref, l_part, pk, alpha);
    publish_p(c, t, q, lane, pk, alpha, __any_sync(0xffffffffu, moved));
    if (more) swap(t + 1, s, x);
    if (t == 0) phase_mark(0, PH_TILE0);  // after the swap: between publish_p and it, the empty mark moved sm_90a code
  }
  phase_mark(0, PH_LOOP);
  publish_row_stats(c, m_ref, l_part, q, lane);
}

// ---- The role split with the softmax in the PV group (the kernel's form since 2026-12-05: -7% at the bf16 headline,
// data/results/h100/2026-12-05-pv-softmax-landing/, which holds the patch as measured) ----
// The QK warps only multiply: per tile, the partial scores of their 32 rows x 16 keys over their dims go to shared
// memory as they are (no swap, no softmax), and the PV warps finish them: PV warp pw takes the softmax of 8 rows
// (m-tile pw >> 1, half pw & 1: rows 16 (pw >> 1) + 8 (pw & 1) + g), summing the two QK warps' partials of each
// score, writes its rows' share of P's A fragments, then all eight meet at one named barrier per tile and multiply
// P V as before. The arithmetic is the second generation's, value for value (the same two partials summed, the same
// softmax, P, rescale factors and row sums; a flagged m-tile's rows all scaled, by 1 where a row did not move, as
// main scales them), so the output is bit for bit that of CfgRoles' kernel.
struct CfgPvs {
  static constexpr int BM = 64, BN = 16;
  static constexpr int QK_WARPS = 4, PV_WARPS = 8, THREADS = (QK_WARPS + PV_WARPS) * 32;
  static constexpr int QK_THREADS = QK_WARPS * 32, PV_THREADS = PV_WARPS * 32;
  static constexpr int SLOTS = 4, DRAFT_PAIRS = 2;
  static constexpr int ROW = D_QK * 2, TILE = BN * ROW, RING = SLOTS * TILE;  // 18,432 / 73,728
  static constexpr int ROPE = BM * 64 * 2, QTAIL = BM * 32 * 2;
  static constexpr int SB = QK_WARPS * 2 * 2 * 2 * 32 * 8;  // a tile's partial scores [QK warp][m][n][h][lane] float2
  static constexpr int PB = 2 * 4 * 32 * 16;                // P [buffer][m-tile][lane]: the A fragment, 16 bytes
  static constexpr int ALPHA = 2 * BM * 4;                  // rescale factors [buffer][row]
  static constexpr int FLAGS = 2 * 8;                       // bytes [buffer][m-tile][row half]: a row's factor is not 1
  static constexpr int STATS = 2 * BM * 4;                  // final row max and sum
  // mbarriers: FULL[4] (a slot's tile landed), S_FULL (the partial scores written: QK threads), S_EMPTY (read: PV
  // threads), STATS (the row statistics written: PV threads)
  static constexpr int MB_FULL = 0, MB_SFULL = SLOTS, MB_SEMPTY = SLOTS + 1, MB_STATS = SLOTS + 2,
                       MBARS = (SLOTS + 3) * 8;
  static constexpr int O_ROPE = RING, O_QTAIL = O_ROPE + ROPE, O_SB = O_QTAIL + QTAIL, O_PB = O_SB + SB,
                       O_ALPHA = O_PB + PB, O_FLAGS = O_ALPHA + ALPHA, O_STATS = O_FLAGS + FLAGS,
                       O_MBAR = O_STATS + STATS;
  // the launch size of the second generation (CfgRoles::SMEM), which the host's planner also holds
  // (kdtree_lab/kernels/launch_plan.py): 32 bytes past the mbarriers unused
  static constexpr int SMEM = CfgRoles::SMEM;
  static_assert(O_MBAR + MBARS <= SMEM, "the layout fits the second generation's launch size");
  static_assert(O_MBAR % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(SMEM <= 101376, "sm_120 allows 99 KB of dynamic shared memory per block");
  // the QK warps hold Q (120) and one tile's partial scores (16); the PV warps the accumulators (128), V and P
  // fragments and the softmax of their rows: the launch's 168 each, less for the QK warps
  static constexpr int LAUNCH_REGS = (65536 / THREADS) / 8 * 8;
  // No spills on either arch, and only together: P's records in the A fragment's register order (one 16-byte load
  // an m-tile, no register moves before the MMAs) and the PV loops' bounds from the split's key count, which the
  // mask holds anyway, not the tile count. Either alone, or QK 152 / PV 176, the running sums in shared memory, P's
  // m-tiles loaded two or one at a time, the tile count read from shared memory: a spill on one arch or both.
  static constexpr int QK_REGS = 160, PV_REGS = 168;
  static_assert(QK_THREADS * QK_REGS + PV_THREADS * PV_REGS <= THREADS * LAUNCH_REGS,
                "setmaxnreg.inc would wait forever for registers the launch did not allocate");
  static constexpr int BAR_QK = 4, BAR_PV = 3;
};

using PvsCtx = RoleCtx<CfgPvs>;

// Byte offset, from O_SB, of lane's float2 of QK warp q, m-tile m of its row half, n-tile n, row half h (elements
// 2 h, 2 h + 1 of the accumulator fragment: row 16 m + 8 h + g of the warp's 32, keys 8 n + 2 t4, + 1).
__device__ __forceinline__ uint32_t pvs_s_rec(int q, int m, int n, int h, int lane) {
  return ((((q * 2 + m) * 2 + n) * 2 + h) * 32 + lane) * 8;
}
// Byte offset, from O_PB, of lane's A fragment of P buffer b, m-tile m: registers 0..3 in order, register h + 2 j
// from the PV warp of row half h (row 16 m + 8 h + g, keys 8 j + 2 t4, + 1).
__device__ __forceinline__ uint32_t pvs_p_rec(int b, int m, int lane) { return ((b * 4 + m) * 32 + lane) * 16; }

// The QK group (warps 0..3): warp q's partial scores of rows 32 (q >> 1) .. + 31 over latent dims 256 (q & 1) ..
// + 255 and rope dims 512 + 32 (q & 1) .. + 31, per tile into the score buffer once the PV group has read the last.
template <bool DRAFT>
__device__ __forceinline__ void pvs_qk(const PvsCtx& c) {
  using C = CfgPvs;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, q = tid >> 5, rh = q >> 1, dh = q & 1;
  const int g = lane >> 2, t4 = lane & 3, mi = lane >> 3, sw = lane & 7;
  // Q: as roles_qk (the rope dims and the latent tail in shared memory, the rest in registers)
  for (int idx = tid; idx < C::BM * 8; idx += C::QK_THREADS) {
    const int r = idx >> 3, ch = idx & 7;
    const __nv_bfloat16* src = q_row(p, w, r);
    cp_async_16s(c.base + C::O_ROPE + r * 128 + ((ch ^ (r & 7)) << 4), src ? src + D_V + 8 * ch : p.q,
                 src ? 16 : 0);
  }
  for (int idx = tid; idx < C::BM * 4; idx += C::QK_THREADS) {
    const int r = idx >> 2, ch = idx & 3;
    const __nv_bfloat16* src = q_row(p, w, r);
    cp_async_16s(c.base + C::O_QTAIL + line_pair_offset(r, ch), src ? src + 256 * (ch >> 1) + 240 + 8 * (ch & 1) : p.q,
                 src ? 16 : 0);
  }
  cp_async_commit();
  uint32_t qf[15][2][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_bfloat16* row = q_row(p, w, 32 * rh + 16 * m + 8 * h + g);
      const __nv_bfloat16* at = row ? row + 256 * dh + 2 * t4 : nullptr;
#pragma unroll
      for (int kk = 0; kk < 15; ++kk)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) qf[kk][m][h + 2 * hi] = at ? ld_global_nc_u32(at + 16 * kk + 8 * hi) : 0u;
    }
  cp_async_wait<0>();
  bar_named(C::BAR_QK, C::QK_THREADS);  // the rope tile is visible to the QK warps
  phase_mark(0, PH_PROLOGUE);

  const uint32_t kofs0 = ((mi >> 1) * 8 + (lane & 7)) * C::ROW + (((mi & 1) ^ (sw & 1)) << 4) + ((sw >> 1) << 5);
  auto kofs = [&](int jj) { return kofs0 ^ (uint32_t)(jj << 5); };
  const uint32_t rope0 = (32 * rh + (lane & 15)) * 128 + ((((4 * dh + (lane >> 4))) ^ sw) << 4);
  auto rope_a = [&](int j) { return c.base + C::O_ROPE + (rope0 ^ (uint32_t)(j << 5)); };
  const uint32_t tail_a = c.base + C::O_QTAIL + line_pair_offset(32 * rh + (lane & 15), 2 * dh + (lane >> 4));
  constexpr int DEPTH = DRAFT ? 2 : C::SLOTS;
  auto kslot = [](int t) { return DRAFT ? 2 * (t & 1) : t & (C::SLOTS - 1); };
  auto full = [&](int t) { return c.mbar + 8 * (C::MB_FULL + kslot(t)); };
  auto parity = [](int t) -> uint32_t { return (t / DEPTH) & 1; };
  const uint32_t s_full = c.mbar + 8 * C::MB_SFULL, s_empty = c.mbar + 8 * C::MB_SEMPTY;
  const uint32_t sb = c.base + C::O_SB + pvs_s_rec(q, 0, 0, 0, lane);

  float s[2][2][4];
  for (int t = 0; t < c.ntiles; ++t) {
    mbar_wait(full(t), parity(t));
    if (t == 0) phase_mark(0, PH_FIRST);
    const uint32_t kt = c.base + kslot(t) * C::TILE;
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      uint32_t kb[4];
      ldsm_x4(kb, kt + kofs(kk & 3) + 128 * (4 * dh + (kk >> 2)));
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        if (kk < 15) {
          mma_bf16(s[m][0], qf[kk < 15 ? kk : 0][m], kb[0], kb[1]);
          mma_bf16(s[m][1], qf[kk < 15 ? kk : 0][m], kb[2], kb[3]);
        } else {
          uint32_t qa[4];
          ldsm_x4(qa, tail_a + 1024 * m);
          mma_bf16(s[m][0], qa, kb[0], kb[1]);
          mma_bf16(s[m][1], qa, kb[2], kb[3]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      uint32_t kb[4];
      ldsm_x4(kb, kt + kofs(2 * dh + j) + 128 * 8);
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        uint32_t qa[4];
        ldsm_x4(qa, rope_a(j) + 2048 * m);
        mma_bf16(s[m][0], qa, kb[0], kb[1]);
        mma_bf16(s[m][1], qa, kb[2], kb[3]);
      }
    }
    if (t >= 1) mbar_wait(s_empty, (t - 1) & 1);  // the PV group has read the partial scores of tile t - 1
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          st_shared_v2(sb + pvs_s_rec(0, m, n, h, 0), __float_as_uint(s[m][n][2 * h]),
                       __float_as_uint(s[m][n][2 * h + 1]));
    mbar_arrive(s_full);
    if (t == 0) phase_mark(0, PH_TILE0);
  }
  phase_mark(0, PH_LOOP);
}

// The PV group (warps 4..11): loads the ring, takes the softmax of its 8 rows from the QK warps' partial scores,
// shares P through shared memory behind one named barrier per tile, multiplies P V into the output columns
// 64 pw .. 64 pw + 63 of all 64 rows, and writes the partial rows.
template <bool DRAFT>
__device__ __forceinline__ void pvs_pv(const PvsCtx& c) {
  using C = CfgPvs;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, pw = (tid >> 5) - C::QK_WARPS, v = tid - C::QK_THREADS;
  const int mi = lane >> 3, sw = lane & 7, g = lane >> 2, t4 = lane & 3;
  const int lrow = v >> 4, sub = v & 15;
  const uint32_t ldst = lrow * C::ROW + ((sub ^ (lrow & 7)) << 4);
  // the ring as this instantiation knows it at compile time (PvsCtx answers the same at run time)
  constexpr int DEPTH = DRAFT ? C::DRAFT_PAIRS : C::SLOTS;
  auto kslot = [](int t) { return DRAFT ? 2 * (t & 1) : t & (C::SLOTS - 1); };
  auto full = [&](int t) { return c.mbar + 8 * (C::MB_FULL + kslot(t)); };
  // the raw kv_indices entry of this thread's key of tile t (0 past the split), checked at its refill a tile later
  // (as roles_pv: the entry's load is not waited on where it is issued)
  auto fetch = [&](int t) -> int64_t {
    const int key = w.kbeg + t * C::BN + lrow;
    return !DRAFT && key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
  };
  auto load_tile = [&](int t, int64_t raw) {
    const int key = w.kbeg + t * C::BN + lrow;
    const bool ok = key < w.kend;
    const uint32_t kd = c.base + kslot(t) * C::TILE + ldst;
    const char* ksrc;
    if (DRAFT) {
      ksrc = reinterpret_cast<const char*>(p.kx + (w.tok0 + (ok ? key : 0)) * p.kx_s) + sub * 16;
      const char* vsrc = reinterpret_cast<const char*>(p.vx + (w.tok0 + (ok ? key : 0)) * p.vx_s) + sub * 16;
      const uint32_t vd = c.base + (kslot(t) + 1) * C::TILE + ldst;
#pragma unroll
      for (int k = 0; k < 4; ++k) cp_async_16s(vd + 256 * k, vsrc + 256 * k, ok ? 16 : 0);
    } else {
      const int64_t slot = ok ? checked_slot(p, raw, sub == 0) : 0;
      ksrc = reinterpret_cast<const char*>(p.kb + slot * p.kb_s) + sub * 16;
    }
#pragma unroll
    for (int k = 0; k < 5; ++k)
      if (k < 4 || sub < 8) cp_async_16s(kd + 256 * k, ksrc + 256 * k, ok ? 16 : 0);
    cp_async_mbar_arrive(full(t));
  };
  for (int t = 0; t < DEPTH && t < c.ntiles; ++t) load_tile(t, fetch(t));
  int64_t pending = fetch(DEPTH);
  phase_mark(0, PH_PROLOGUE);

  // this warp's softmax rows: m-tile sm, half sh, row srow of the CTA; their partial scores from QK warps 2 (sm >> 1)
  // (latent dims 0..255) and 2 (sm >> 1) + 1 (256..511), m-tile sm & 1 of their row half
  const int sm = pw >> 1, sh = pw & 1, srow = 16 * sm + 8 * sh + g;
  const uint32_t s_in = c.base + C::O_SB + pvs_s_rec(2 * (sm >> 1), sm & 1, 0, sh, lane);
  constexpr uint32_t S_DH = 8 * 32 * 8, S_N = 2 * 32 * 8;  // to the dim half's partner warp's, to n-tile 1
  const uint32_t s_full = c.mbar + 8 * C::MB_SFULL, s_empty = c.mbar + 8 * C::MB_SEMPTY;
  const DraftMask dm = draft_mask(p, w);
  const int node = node_head(w.row0 + srow, p.H).x;
  const int span = w.kend - w.kbeg;
  const float scale = DRAFT ? p.scale_draft : p.scale_pre;
  float m_ref = -INFINITY, l_part = 0.f;
  // O_ALPHA: [buffer][row] rescale factors, O_FLAGS: [buffer][8] flag bytes (immediate offsets from c.base)

  const uint32_t vofs0 = ((mi & 1) * 8 + (lane & 7)) * C::ROW + 128 * pw + ((((mi >> 1) ^ (sw & 1))) << 4) +
                         ((sw >> 1) << 5);
  float acc[4][8][4];
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;

  for (int t = 0; t * C::BN < span; ++t) {  // t < c.ntiles, counted in keys: no register holds the tile count
    const int b = t & 1;
    // the softmax of this warp's rows (softmax_rows' arithmetic in its order, one row per lane)
    mbar_wait(s_full, t & 1);
    if (t == 0) phase_mark(0, PH_FIRST);
    float x[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const uint2 a = n ? ld_shared_v2_at<S_N>(s_in) : ld_shared_v2_at<0>(s_in);
      const uint2 d = n ? ld_shared_v2_at<S_DH + S_N>(s_in) : ld_shared_v2_at<S_DH>(s_in);
      x[n][0] = __uint_as_float(a.x) + __uint_as_float(d.x);
      x[n][1] = __uint_as_float(a.y) + __uint_as_float(d.y);
    }
    mbar_arrive(s_empty);  // the QK group may write tile t + 1's partial scores
    const uint32_t bits = visible_bits<DRAFT, 2>(t * C::BN, t4, dm, node, node, span);
    float y[2][2], mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        y[n][e] = (bits >> (4 * n + e)) & 1 ? x[n][e] * scale : -INFINITY;
        mx = fmaxf(mx, y[n][e]);
      }
    float alpha;
    const bool moved = move_reference<Bf16P>(quad_max(mx), m_ref, alpha);
    float sum = 0.f;
    const float mr = m_ref == -INFINITY ? 0.f : m_ref;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        y[n][e] = exp2f(y[n][e] - mr);
        sum += y[n][e];
      }
    l_part = l_part * alpha + sum;
    const uint32_t pr = c.base + pvs_p_rec(b, sm, lane) + 4 * sh;  // this row half's registers sh, sh + 2
    st_shared_u32_at<C::O_PB>(pr, pack_bf16(y[0][0], y[0][1]));
    st_shared_u32_at<C::O_PB + 8>(pr, pack_bf16(y[1][0], y[1][1]));
    const bool any_moved = __any_sync(0xffffffffu, moved);
    // every tile (1 where the row did not move): a flagged m-tile scales both halves' rows, as main does, where a
    // multiplication by 1 flushes a denormal accumulator (FTZ) the same way
    if (t4 == 0) st_shared_u32_at<C::O_ALPHA>(c.base + 4 * (b * C::BM + srow), __float_as_uint(alpha));
    if (lane == 0) st_shared_u8_at<C::O_FLAGS>(c.base + 8 * b + 2 * sm + sh, any_moved ? 1u : 0u);
    bar_named(C::BAR_PV, C::PV_THREADS);  // P(t) and its factors are in; every PV warp is done with tile t - 1
    if (t >= 1 && (t - 1 + DEPTH) * C::BN < span) {
      load_tile(t - 1 + DEPTH, pending);  // the slot of tile t - 1 (the QK group wrote S(t): done with it)
      pending = fetch(t + DEPTH);
    }
    // the rescale of an m-tile whose rows' reference maximum moved in either half (warp-uniform: the two halves'
    // flag bytes, 16 bits of the m-tile's word), both halves' rows by their factors, as acquire_p does
    const uint2 fw = ld_shared_v2_at<C::O_FLAGS>(c.base + 8 * b);
#pragma unroll
    for (int m = 0; m < 4; ++m)
      if (((m < 2 ? fw.x : fw.y) >> (16 * (m & 1))) & 0xffffu) {
        const uint32_t ar = c.base + 4 * (b * C::BM + g);
        const float a0 = __uint_as_float(ld_shared_u32_at<C::O_ALPHA>(ar + 64 * m));
        const float a1 = __uint_as_float(ld_shared_u32_at<C::O_ALPHA + 32>(ar + 64 * m));
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          acc[m][n][0] *= a0;
          acc[m][n][1] *= a0;
          acc[m][n][2] *= a1;
          acc[m][n][3] *= a1;
        }
      }
    uint32_t pa[4][4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {  // m-tile m at an immediate offset from m-tile 0's record
      const uint32_t pl = c.base + pvs_p_rec(b, 0, lane);
      const uint4 u = m == 0 ? ld_shared_v4_at<C::O_PB>(pl)
                      : m == 1 ? ld_shared_v4_at<C::O_PB + 512>(pl)
                      : m == 2 ? ld_shared_v4_at<C::O_PB + 1024>(pl)
                               : ld_shared_v4_at<C::O_PB + 1536>(pl);
      pa[m][0] = u.x, pa[m][1] = u.y, pa[m][2] = u.z, pa[m][3] = u.w;
    }
    mbar_wait(full(t), (t / DEPTH) & 1);  // the tile's V (complete: the QK group waited on it)
    const uint32_t vt = c.base + (DRAFT ? kslot(t) + 1 : kslot(t)) * C::TILE;
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t vb[4];
      ldsm_x4_trans(vb, vt + (vofs0 ^ (uint32_t)(np << 5)));
      pv_mma(acc, pa, vb, np);
    }
    if (t == 0) phase_mark(0, PH_TILE0);
  }
  cp_async_wait<0>();
  phase_mark(0, PH_LOOP);
  // this warp's rows' statistics, then every row's (write_partial_rows waits for all PV threads' STATS arrival)
  {
    float* stats = c.stats();
    const float l = quad_sum(l_part);
    if (t4 == 0) {
      stats[srow] = m_ref;
      stats[C::BM + srow] = l;
    }
    mbar_arrive(c.stats_bar());
  }
  write_partial_rows<true>(c, acc, pw == 0 && (lane & 3) == 0, 64 * pw, lane);
}

template <int BM>
__global__ void __launch_bounds__(CfgPvs::THREADS, 1) verify_sm120_roles_kernel(Params p) {
  using C = CfgPvs;
  static_assert(BM == C::BM, "64-row tiles");
  extern __shared__ __align__(128) unsigned char smem[];
  phase_mark(0, PH_ENTRY);
  Work w;
  if (!setup_work<BM, C::THREADS>(p, C::BN, w)) return;
  phase_mark(0, PH_WORK);
  const uint32_t base = smem_u32(smem);
  const PvsCtx c{p, w, base, base + C::O_MBAR, (w.kend - w.kbeg + C::BN - 1) / C::BN,
                 w.draft ? C::DRAFT_PAIRS : C::SLOTS};
  phase_meta(c.ntiles, w.draft);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < C::SLOTS; ++s) mbar_init(c.mbar + 8 * (C::MB_FULL + s), C::PV_THREADS);
    mbar_init(c.mbar + 8 * C::MB_SFULL, C::QK_THREADS);
    mbar_init(c.mbar + 8 * C::MB_SEMPTY, C::PV_THREADS);
    mbar_init(c.mbar + 8 * C::MB_STATS, C::PV_THREADS);
  }
  __syncthreads();
  phase_mark(0, PH_READY);
  if (threadIdx.x >= C::QK_THREADS) {
    regs_inc<C::PV_REGS>();  // at the launch's count too: ptxas then allocates this side's code for it
    if (w.draft)
      pvs_pv<true>(c);
    else
      pvs_pv<false>(c);
  } else {
    regs_dec<C::QK_REGS>();
    if (w.draft)
      pvs_qk<true>(c);
    else
      pvs_qk<false>(c);
  }
  phase_mark(0, PH_DONE);
}

constexpr ConfigEntry sm120_roles_entry() {
  return ConfigEntry{CfgPvs::BM, CfgPvs::SLOTS, CfgPvs::THREADS, CfgPvs::SMEM, CfgPvs::BN,
                     "verify_sm120_roles_kernel<64>", &verify_sm120_roles_kernel<CfgPvs::BM>, ARCH_MMA_SYNC,
                     KV_BF16_BIT};
}

}  // namespace kdt
