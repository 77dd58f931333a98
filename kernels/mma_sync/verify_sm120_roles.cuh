// The sm_120 kernel, second generation (impl cuda_sm120_roles): one 64-row CTA whose warps split the step by role,
// mma.sync m16n8k16 within sm_120's 99 KB and 255 registers. docs/performance.md ("The sm_120 kernel, second
// generation") has the design, its prediction and the measurements.
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
  write_partial_rows(c, acc, pw == 0 && (lane & 3) == 0, 64 * pw, lane);
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
  const int node0 = (w.row0 + 16 * q + g) / p.H, node1 = (w.row0 + 16 * q + 8 + g) / p.H;
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

template <int BM>
__global__ void __launch_bounds__(CfgRoles::THREADS, 1) verify_sm120_roles_kernel(Params p) {
  using C = CfgRoles;
  static_assert(BM == C::BM, "64-row tiles");
  extern __shared__ __align__(128) unsigned char smem[];
  phase_mark(0, PH_ENTRY);
  Work w;
  if (!setup_work<BM, C::THREADS>(p, C::BN, w)) return;
  phase_mark(0, PH_WORK);
  const uint32_t base = smem_u32(smem);
  const RolesCtx c{p, w, base, base + C::O_MBAR, (w.kend - w.kbeg + C::BN - 1) / C::BN,
                   w.draft ? C::DRAFT_PAIRS : C::SLOTS};
  phase_meta(c.ntiles, w.draft);
  if (threadIdx.x == 0) init_role_mbarriers<C>(c.mbar);
  __syncthreads();
  phase_mark(0, PH_READY);
  if (threadIdx.x >= C::QK_THREADS) {
    regs_dec<C::PV_REGS>();
    roles_pv(c);
  } else {
    regs_inc<C::QK_REGS>();
    if (w.draft)
      roles_qk<true>(c);
    else
      roles_qk<false>(c);
  }
  phase_mark(0, PH_DONE);
}

constexpr ConfigEntry sm120_roles_entry() {
  return ConfigEntry{CfgRoles::BM, CfgRoles::SLOTS, CfgRoles::THREADS, CfgRoles::SMEM, CfgRoles::BN,
                     "verify_sm120_roles_kernel<64>", &verify_sm120_roles_kernel<CfgRoles::BM>, ARCH_MMA_SYNC,
                     KV_BF16_BIT};
}

}  // namespace kdt
