// The sm_120 kernel, third form (impl cuda_sm120_halves): a 2-CTA cluster per 64-row tile that splits the head dims
// between its two CTAs, and each CTA's warps by role; mma.sync m16n8k16 within sm_120's 99 KB and 255 registers.
// docs/performance.md ("The sm_120 kernel, third form") has the design, its prediction and the measurements.
//
// Why: the second generation (verify_sm120_roles.cuh) is bound by one QK warp per SM sub-partition running a chain
// of 18 dependent k16 steps in four accumulator chains per 16-key tile, beside its softmax. Splitting the dims over
// a cluster halves the work per SM per tile and frees the registers that longer tiles and more chains need:
//   CTA rank r of the pair owns latent dims 256 r .. + 255 and rope dims 512 + 32 r .. + 31 of Q and K (288 dims,
//   18 k16 steps), and output columns 256 r .. + 255 (V is K's latent part, so V's columns are in the same slice);
//   it loads only that slice of each key (576 B), so the pair reads each KV byte once per 64 rows.
//   warps 0-3 (QK): warp q holds the A fragments of rows 32 (q >> 1) .. + 31 over half of the CTA's dims (128 latent
//     + 16 rope, 72 registers) and computes their partial S over 32-key tiles in eight accumulator chains of 9 steps;
//     partner warps (q ^ 1) swap one 16-row m-tile, so warp q holds m-tile q over the CTA's 288 dims; the two CTAs
//     then swap that m-tile through distributed shared memory (each writes its partial into the other's buffer and
//     arrives on the other's mbarrier), and both finish the same softmax: S = S_0 + S_1 is the same sum in either
//     CTA (fp32 addition commutes), so P, the rescale factors and the row statistics are identical in both, and no
//     P or statistic crosses the cluster. Software-pipelined: tile t + 1's MMAs are issued before tile t's exchange
//     is awaited, so the partner's latency hides under them.
//   warps 4-7 (PV): warp p owns output columns 256 r + 64 p .. + 63 of all 64 rows (128 fp32 accumulators), reads
//     P and V (ldmatrix.trans) from shared memory, and loads the ring with cp.async.
// The ring: three 32-key tiles of the CTA's slice (latent rows of 512 B, chunks XOR-swizzled by (key & 7) in each
// 128-byte group; rope rows of 64 B two per line), one mbarrier per slot completed by cp.async.mbarrier.arrive.
// Hand-offs: P in two buffers (P_FULL, P_EMPTY), the in-CTA swap in two buffers behind a pair barrier, the cluster
// swap in two buffers per QK warp (st.async into the partner's buffer, completing its X_FULL transaction). The draft block
// uses slot 0 for K and slot 1 for V (one tile at a time, not pipelined). A cluster barrier after the mbarrier
// setup and before exit: no CTA touches its partner's shared memory before it is set up or after it has exited.
// 97,440 B of shared memory, 256 threads; every instruction is one sm_120a has (mma.sync, ldmatrix, cp.async,
// mbarrier try_wait, mapa, st.async, barrier.cluster, named barriers). bf16 pools only: an fp8 pool runs
// the first kernel's e4m3 variant (kdtree_verify.cu). What it shares with the second generation (the context, the
// mbarriers, the m-tile softmax, the P hand-off, the PV MMAs, the epilogue) is in roles_common.cuh.
#pragma once
#include "../common/frame.cuh"
#include "roles_common.cuh"
#include "verify_sm120_halves_layout.cuh"

namespace kdt {

struct CfgHalves {
  static constexpr int BM = 64, BN = halves::BN, CLUSTER = 2;  // rows per pair, keys per tile, CTAs per pair
  static constexpr int QK_WARPS = 4, PV_WARPS = 4, THREADS = (QK_WARPS + PV_WARPS) * 32;
  static constexpr int QK_THREADS = QK_WARPS * 32, PV_THREADS = PV_WARPS * 32;
  static constexpr int SLOTS = 3, DRAFT_PAIRS = 1;          // the draft block: one (K, V) pair, not pipelined
  static constexpr int TILE = halves::TILE;                  // the CTA's slice of 32 keys (the layout header)
  static constexpr int RING = SLOTS * TILE;                  // 55,296
  // the swaps: 2 buffers x 4 QK warps x 4 n-tiles x 32 lanes x 16 bytes (n-tile major: each 16-byte access of a
  // warp covers 512 contiguous bytes, no bank conflict)
  static constexpr int SWAP = 2 * 4 * 4 * 32 * 16;
  static constexpr int PB = 2 * 2 * 4 * 32 * 16;             // P A fragments: 2 buffers x 2 k16 steps x 4 m-tiles
  static constexpr int ALPHA = 2 * BM * 4, FLAGS = 2 * 4 * 4, STATS = 2 * BM * 4;
  // mbarriers: FULL[3] (a slot's tile landed), P_FULL[2], P_EMPTY[2], X_FULL[2][4] (the partner's partial S of
  // m-tile q landed), STATS (row statistics written)
  static constexpr int MB_FULL = 0, MB_PFULL = SLOTS, MB_PEMPTY = SLOTS + 2, MB_XFULL = SLOTS + 4,
                       MB_STATS = SLOTS + 12, MBARS = (SLOTS + 13) * 8;
  static constexpr int O_SX = RING, O_XS = O_SX + SWAP, O_PB = O_XS + SWAP, O_ALPHA = O_PB + PB,
                       O_FLAGS = O_ALPHA + ALPHA, O_STATS = O_FLAGS + FLAGS, O_MBAR = O_STATS + STATS;
  static constexpr int SMEM = O_MBAR + MBARS;
  static_assert(O_MBAR % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(SMEM <= 101376, "sm_120 allows 99 KB of dynamic shared memory per block");
  // named barriers (0 is __syncthreads): the partner pairs' swap (1, 2), the PV group
  static constexpr int BAR_PAIR = 1, BAR_PV = 3;
};

// The CTA's work, shared memory and ring (roles_common.cuh), and its rank in the pair.
struct HalvesCtx : RoleCtx<CfgHalves> {
  uint32_t rank;
};

// The PV group (warps 4..7): loads the ring (the CTA's slice of each key), multiplies P V into output columns
// 256 rank + 64 pw .. + 63 of all 64 rows, writes those columns of the partial rows (rank 0 also the LSEs).
__device__ __forceinline__ void halves_pv(const HalvesCtx& c) {
  using C = CfgHalves;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, pw = (tid >> 5) - C::QK_WARPS, v = tid - C::QK_THREADS;
  // loads: 8 threads per key, 16 keys per pass, two passes; this thread moves latent chunks sub + 8 i (i < 4: 128
  // contiguous bytes per 8 lanes) and, for sub < 4, rope chunk sub of keys lrow and lrow + 16
  const int lrow = v >> 3, sub = v & 7;
  const int lat0 = 256 * c.rank, rope0 = D_V + 32 * c.rank;  // the slice's first latent and rope dims
  auto fetch = [&](int t, int pass) -> int64_t {
    const int key = w.kbeg + t * C::BN + lrow + 16 * pass;
    return !w.draft && key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
  };
  auto load_tile = [&](int t, const int64_t (&raw)[2]) {
    const uint32_t kd = c.base + c.kslot(t) * C::TILE, vd = c.base + c.vslot(t) * C::TILE;
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int k = lrow + 16 * pass, key = w.kbeg + t * C::BN + k;
      const bool ok = key < w.kend;
      const int bytes = ok ? 16 : 0;
      const __nv_bfloat16* krow;
      if (w.draft) {
        krow = p.kx + (w.tok0 + (ok ? key : 0)) * p.kx_s;
        const __nv_bfloat16* vrow = p.vx + (w.tok0 + (ok ? key : 0)) * p.vx_s;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          cp_async_16s(vd + halves::lat_offset(k, sub + 8 * i), vrow + lat0 + 8 * (sub + 8 * i), bytes);
      } else {
        const int64_t slot = ok ? checked_slot(p, raw[pass], sub == 0) : 0;
        krow = p.kb + slot * p.kb_s;
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
        cp_async_16s(kd + halves::lat_offset(k, sub + 8 * i), krow + lat0 + 8 * (sub + 8 * i), bytes);
      if (sub < 4) cp_async_16s(kd + halves::rope_offset(k, sub), krow + rope0 + 8 * sub, bytes);
    }
    cp_async_mbar_arrive(c.full(t));
  };
  for (int t = 0; t < c.depth && t < c.ntiles; ++t) {
    const int64_t raw[2] = {fetch(t, 0), fetch(t, 1)};
    load_tile(t, raw);
  }
  int64_t pending[2] = {fetch(c.depth, 0), fetch(c.depth, 1)};

  const uint32_t vofs0 = halves::v_base(lane, pw);  // V fragments (verify_sm120_halves_layout.cuh)
  float acc[4][8][4];
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;

  for (int t = 0; t < c.ntiles; ++t) {
    const int b = t & 1;
    acquire_p(c, t, acc, lane);
    mbar_wait(c.full(t), c.full_parity(t));  // the tile's V (complete: the QK group waited on it)
    const uint32_t vt = c.base + c.vslot(t) * C::TILE;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t pa[4][4];
      load_p<2>(c.base + C::O_PB, b, ks, lane, pa);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t vb[4];
        ldsm_x4_trans(vb, vt + halves::v_step(vofs0, ks, np));
        pv_mma(acc, pa, vb, np);
      }
    }
    if (t + 2 < c.ntiles) mbar_arrive(c.p_empty(t));  // P buffer b may take P(t + 2)
    if (t + c.depth < c.ntiles) {
      bar_named(C::BAR_PV, C::PV_THREADS);  // all PV warps are done with this tile's slots
      load_tile(t + c.depth, pending);
      pending[0] = fetch(t + c.depth + 1, 0);
      pending[1] = fetch(t + c.depth + 1, 1);
    }
  }
  cp_async_wait<0>();
  write_partial_rows(c, acc, c.rank == 0 && pw == 0 && (lane & 3) == 0, 256 * c.rank + 64 * pw, lane);
}

// The QK group (warps 0..3). DRAFT: the draft block, masked by the tree (custom_mask) or causally, one tile at a
// time; else a prefix split, masked only past its end, software-pipelined: tile t + 1's QK MMAs are issued before
// tile t's partial S from the partner CTA is awaited, then tile t's softmax, then tile t + 1's swaps.
template <bool DRAFT>
__device__ __forceinline__ void halves_qk(const HalvesCtx& c) {
  using C = CfgHalves;
  const Params& p = c.p;
  const Work& w = c.w;
  const int tid = threadIdx.x, lane = tid & 31, q = tid >> 5, rh = q >> 1, dh = q & 1;
  const int g = lane >> 2, t4 = lane & 3;
  const uint32_t other = c.rank ^ 1;
  // A fragments of rows 32 rh + 16 m + 8 h + g: latent dims 256 rank + 128 dh + 16 kk + 2 t4 (kk < 8), rope dims
  // 512 + 32 rank + 16 dh + 2 t4 (kk = 8), + 8 for the fragment's upper half; rows past the request's are zeros
  uint32_t qf[9][2][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __nv_bfloat16* row = q_row(p, w, 32 * rh + 16 * m + 8 * h + g);
      const __nv_bfloat16* lat = row ? row + 256 * c.rank + 128 * dh + 2 * t4 : nullptr;
      const __nv_bfloat16* rope = row ? row + D_V + 32 * c.rank + 16 * dh + 2 * t4 : nullptr;
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) qf[kk][m][h + 2 * hi] = lat ? ld_global_nc_u32(lat + 16 * kk + 8 * hi) : 0u;
        qf[8][m][h + 2 * hi] = rope ? ld_global_nc_u32(rope + 8 * hi) : 0u;
      }
    }

  // K fragments (verify_sm120_halves_layout.cuh)
  const uint32_t kofs0 = halves::k_base(lane), ropeofs = halves::rope_base(lane, dh);
  // the ring as this instantiation knows it at compile time (HalvesCtx answers the same at run time)
  constexpr int DEPTH = DRAFT ? 1 : C::SLOTS;
  auto kslot = [](int t) { return DRAFT ? 0 : t % C::SLOTS; };
  auto full = [&](int t) { return c.mbar + 8 * (C::MB_FULL + kslot(t)); };
  auto parity = [](int t) -> uint32_t { return (t / DEPTH) & 1; };
  const DraftMask dm = draft_mask(p, w);
  const int node0 = (w.row0 + 16 * q + g) / p.H, node1 = (w.row0 + 16 * q + 8 + g) / p.H;
  const int span = w.kend - w.kbeg;  // keys of this split (the draft block: kbeg = 0)
  const float scale = DRAFT ? p.scale_draft : p.scale_pre;
  float m_ref[2] = {-INFINITY, -INFINITY}, l_part[2] = {0.f, 0.f};

  // QK of the tile in slot kt: partial S of m-tiles 2 rh, 2 rh + 1 x 32 keys over this warp's 144 dims, in eight
  // chains of nine k16 steps
  auto qk_mma = [&](uint32_t kt, float (&s)[2][4][4]) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 4; ++n) s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < 9; ++kk)
#pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        uint32_t kb[4];
        ldsm_x4(kb, kt + (kk < 8 ? halves::k_step(kofs0, kk, kh, dh) : halves::rope_step(ropeofs, kh)));
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          mma_bf16(s[m][2 * kh], qf[kk][m], kb[0], kb[1]);
          mma_bf16(s[m][2 * kh + 1], qf[kk][m], kb[2], kb[3]);
        }
      }
  };
  // the swap inside the CTA: m-tile (dh ^ 1) of the row half goes to the partner warp, ours comes back, summed
  auto swap = [&](int t, const float (&s)[2][4][4], float (&x)[4][4]) {
    const uint32_t out = c.base + C::O_SX + ((t & 1) * 4 + (q ^ 1)) * 2048 + lane * 16;
    const uint32_t in = c.base + C::O_SX + ((t & 1) * 4 + q) * 2048 + lane * 16;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      float give[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        give[e] = dh ? s[0][n][e] : s[1][n][e];
        x[n][e] = dh ? s[1][n][e] : s[0][n][e];
      }
      st_shared_v4(out + 512 * n, make_uint4(__float_as_uint(give[0]), __float_as_uint(give[1]),
                                            __float_as_uint(give[2]), __float_as_uint(give[3])));
    }
    bar_named(C::BAR_PAIR + rh, 64);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const uint4 u = ld_shared_v4(in + 512 * n);
      x[n][0] += __uint_as_float(u.x);
      x[n][1] += __uint_as_float(u.y);
      x[n][2] += __uint_as_float(u.z);
      x[n][3] += __uint_as_float(u.w);
    }
  };
  // the swap across the cluster: this CTA's partial of m-tile q into the partner's buffer by st.async, which
  // completes 16 bytes of the partner's X_FULL transaction per store (2 KB per warp). Buffer t & 1 is written again
  // for tile t + 2 only after this warp has waited for the partner's partial of t + 1, which the partner sends
  // after it has read ours of t (its X_FULL completes with release at cluster scope, our wait acquires): no
  // arrival back is needed.
  const uint32_t x_slot = q * 2048 + lane * 16;
  auto x_full = [&](int t) { return c.mbar + 8 * (C::MB_XFULL + 4 * (t & 1) + q); };
  auto x_send = [&](int t, const float (&x)[4][4]) {
    const uint32_t dst = cluster_addr(c.base + C::O_XS + (t & 1) * (4 * 2048) + x_slot, other);
    const uint32_t bar = cluster_addr(x_full(t), other);
#pragma unroll
    for (int n = 0; n < 4; ++n)
      st_async_v4(dst + 512 * n, make_uint4(__float_as_uint(x[n][0]), __float_as_uint(x[n][1]),
                                           __float_as_uint(x[n][2]), __float_as_uint(x[n][3])), bar);
  };
  // the partner's partial of m-tile q, added (either order gives the same fp32 sum: both CTAs hold the same S);
  // lane 0's arrival expects the 2 KB (the partner's stores may land before it: the phase completes on both)
  auto x_recv = [&](int t, float (&x)[4][4]) {
    if (lane == 0) mbar_arrive_expect_tx(x_full(t), 32 * 64);
    mbar_wait_cluster(x_full(t), (t >> 1) & 1);
    const uint32_t src = c.base + C::O_XS + (t & 1) * (4 * 2048) + x_slot;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const uint4 u = ld_shared_v4(src + 512 * n);
      x[n][0] += __uint_as_float(u.x);
      x[n][1] += __uint_as_float(u.y);
      x[n][2] += __uint_as_float(u.z);
      x[n][3] += __uint_as_float(u.w);
    }
  };
  auto finish = [&](int t, const float (&x)[4][4]) {
    uint32_t pk[2][4];
    float alpha[2];
    const bool moved = softmax_tile(x, visible_bits<DRAFT, 4>(t * C::BN, t4, dm, node0, node1, span), scale, m_ref,
                                    l_part, pk, alpha);
    publish_p(c, t, q, lane, pk, alpha, __any_sync(0xffffffffu, moved));
  };

  float s[2][4][4], x[4][4];
  if constexpr (DRAFT) {
    for (int t = 0; t < c.ntiles; ++t) {
      mbar_wait(full(t), parity(t));
      qk_mma(c.base + kslot(t) * C::TILE, s);
      swap(t, s, x);
      x_send(t, x);
      x_recv(t, x);
      finish(t, x);
    }
  } else {
    mbar_wait(full(0), parity(0));
    qk_mma(c.base + kslot(0) * C::TILE, s);
    swap(0, s, x);
    x_send(0, x);
    for (int t = 0; t < c.ntiles; ++t) {
      const bool more = t + 1 < c.ntiles;
      if (more) mbar_wait(full(t + 1), parity(t + 1));
      // tile t + 1's MMAs (the last iteration re-reads tile t, whose result is dropped), then tile t's exchange
      qk_mma(c.base + kslot(more ? t + 1 : t) * C::TILE, s);
      x_recv(t, x);
      finish(t, x);
      if (more) {
        swap(t + 1, s, x);
        x_send(t + 1, x);
      }
    }
  }
  // the same row statistics in both CTAs
  publish_row_stats(c, m_ref, l_part, q, lane);
}

template <int BM>
__global__ void __cluster_dims__(CfgHalves::CLUSTER, 1, 1) __launch_bounds__(CfgHalves::THREADS, 1)
    verify_sm120_halves_kernel(Params p) {
  using C = CfgHalves;
  static_assert(BM == C::BM, "64-row tiles");
  extern __shared__ __align__(128) unsigned char smem[];
  Work w;
  // both CTAs of a pair share the row tile, so they return (or not) together, before touching each other
  if (!setup_work<BM, C::THREADS>(p, C::BN, w, blockIdx.x / C::CLUSTER)) return;
  const uint32_t base = smem_u32(smem);
  const HalvesCtx c{{p, w, base, base + C::O_MBAR, (w.kend - w.kbeg + C::BN - 1) / C::BN,
                    w.draft ? C::DRAFT_PAIRS : C::SLOTS},
                   cluster_rank()};
  if (threadIdx.x == 0) {
    init_role_mbarriers<C>(c.mbar);
#pragma unroll
    for (int i = 0; i < 8; ++i) mbar_init(c.mbar + 8 * (C::MB_XFULL + i), 1);  // lane 0's expect_tx arrival
    fence_mbar_init_cluster();
  }
  cluster_sync();  // the partner's mbarriers are set up before any arrival on them
  if (threadIdx.x >= C::QK_THREADS)
    halves_pv(c);
  else if (w.draft)
    halves_qk<true>(c);
  else
    halves_qk<false>(c);
  cluster_sync();  // the partner is done with our shared memory before either exits
}

constexpr ConfigEntry sm120_halves_entry() {
  return ConfigEntry{CfgHalves::BM,  CfgHalves::SLOTS, CfgHalves::THREADS, CfgHalves::SMEM,
                     CfgHalves::BN,  "verify_sm120_halves_kernel<64>",     &verify_sm120_halves_kernel<CfgHalves::BM>,
                     ARCH_MMA_SYNC, KV_BF16_BIT,   CfgHalves::CLUSTER};
}

}  // namespace kdt
