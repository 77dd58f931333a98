// kdtree-lab verify, v4: the sm_90a path with warpgroup MMA (wgmma), the default on compute capability 9.x.
// The wgmma code is compiled for sm_90a only; on every other
// arch the kernel body is a trap, and the launcher refuses to run it on a GPU that is not compute capability 9.x
// (it selects it there only when the library was built with sm_90a code: KDT_SM90A_BUILT).
//
// CTA: 64 rows, two warpgroups (256 threads), 64 keys per step, two KV stages (231 KB of shared memory). Every
// tile is stored as wgmma's 128-byte-swizzle atoms: for a 64-row tile of 576 dims, atom a (dims 64a..64a+63) is 64
// rows of 128 bytes (8 KB, 1024-byte aligned), and 16-byte chunk x of row r sits at chunk x ^ (r & 7), the XOR of
// address bits 4-6 with bits 7-9 that the hardware applies.
// QK: warpgroup g computes S[64 rows x keys 32g..32g+31] = Q K^T with 36 wgmma m64n32k16 (Q and K K-major).
// Softmax: the two halves' row maxima meet in shared memory, so both warpgroups keep the same reference maximum per
// row (the lazy rescale, RESCALE_SLACK); P (bf16) of both halves goes to one 64 x 64 swizzled tile.
// PV: warpgroup g computes O[64 rows x columns 256g..256g+255] += P V with 4 wgmma m64n256k16: P K-major, V read
// from the first 512 dims of the same KV tile as an N-major operand (64-column atoms 8 KB apart, 8-key groups 1 KB
// apart). 128 fp32 accumulators per thread; the tensor cores read both operands from shared memory, so the
// ldmatrix traffic that bounds the mma.sync kernels disappears.
#pragma once
#include "wgmma_common.cuh"

namespace kdt {

// FP8 (issue 17): an e4m3 pool. Prefix CTAs split the KV ring (2 x 72 KB) into one bf16 tile (the
// swizzled atoms step4 reads) and a two-slot ring of e4m3 tiles (36 KB each, loaded two tiles ahead); each step
// converts its e4m3 tile into the bf16 atoms (exactly), fences them for the async proxy, and runs step4 unchanged.
template <int BM, int STAGES, bool FP8 = false>
__global__ void __launch_bounds__(Cfg4<STAGES>::THREADS, 1) verify_wgmma_kernel(Params p) {
  using C = Cfg4<STAGES>;
  static_assert(BM == C::BM && STAGES >= 2, "wgmma tiles are 64 rows; the draft block needs two ring slots");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);  // atoms on 1 KB boundaries
  unsigned char* qs = smem;
  unsigned char* kring = smem + C::Q_BYTES;
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES + C::K_BYTES);
  float* red = reinterpret_cast<float*>(smem + C::Q_BYTES + C::K_BYTES + C::P_BYTES);

  Work w;
  if (!setup_work<C::BM, C::THREADS>(p, BN4, w)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = warp >> 2, wq = warp & 3;
  load_q_tile<C::BM, C::THREADS>(p, w, atom_tile(qs));
  const uint32_t qt = smem_u32(qs), ring = smem_u32(kring), pt = smem_u32(ps);
  float o[32][4];
#pragma unroll
  for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  if (FP8 && !w.draft) {
    // e4m3 tile t: row r at 576 r in slot (t % 2) of the ring at kring + 72 KB; thread (lrow, l4) loads and converts
    // chunks l4 + 4k (k < 9) of row lrow = 8 warp + lane / 4.
    constexpr int ROW8 = D_QK, TILE8 = BN4 * ROW8;
    const uint32_t ring8 = ring + C::TILE_BYTES;
    const int lrow = warp * 8 + (lane >> 2), l4 = lane & 3;
    const int ntiles = (w.kend - w.kbeg + BN4 - 1) / BN4;
    const unsigned char* kb8 = reinterpret_cast<const unsigned char*>(p.kb);
    auto fetch = [&](int t) -> int64_t {
      const int key = w.kbeg + t * BN4 + lrow;
      return key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
    };
    auto load8 = [&](int t, int64_t raw) {
      const uint32_t d = ring8 + (t % 2) * TILE8 + lrow * ROW8;
      const bool ok = w.kbeg + t * BN4 + lrow < w.kend;
      const int64_t slot = ok ? checked_slot(p, raw, l4 == 0) : 0;
      const unsigned char* src = kb8 + slot * p.kb_s;
#pragma unroll
      for (int k = 0; k < 9; ++k) cp_async_16s(d + (l4 + 4 * k) * 16, src + (l4 + 4 * k) * 16, ok ? 16 : 0);
    };
    if (ntiles > 0) load8(0, fetch(0));
    cp_async_commit();  // group 0: Q and tile 0
    if (ntiles > 1) load8(1, fetch(1));
    cp_async_commit();
    int64_t pending = fetch(2);
    for (int t = 0; t < ntiles; ++t) {
      cp_async_wait<1>();  // this thread's part of tile t (and Q) has landed
      __syncthreads();     // every warp is done with step t - 1's bf16 tile
      const uint32_t s8 = ring8 + (t % 2) * TILE8 + lrow * ROW8;
#pragma unroll
      for (int k = 0; k < 9; ++k) {
        const int c = l4 + 4 * k;  // e4m3 chunk: dims 16c .. 16c + 15 = bf16 chunks 2c, 2c + 1
        const uint4 x = ld_shared_v4(s8 + c * 16);
        st_shared_v4(ring + atom_off(lrow, 2 * c), e4m3x8_to_bf16x8(x.x, x.y));
        st_shared_v4(ring + atom_off(lrow, 2 * c + 1), e4m3x8_to_bf16x8(x.z, x.w));
      }
      fence_proxy_async();  // the converted atoms (and, at t = 0, Q's cp.async writes) for wgmma
      __syncthreads();      // the bf16 tile is whole; the e4m3 slot of tile t is free
      if (t + 2 < ntiles) load8(t + 2, pending);
      cp_async_commit();
      pending = fetch(t + 3);
      const int key0 = w.kbeg + t * BN4;
      step4(qt, ring, ring, pt, ps, red, p.scale_pre, o, m, l, key0 + BN4 <= w.kend,
            [&](int col, int) { return key0 + col < w.kend; });
    }
  } else if (!w.draft) {
    prefix_pipeline<STAGES, BN4, C::TILE_BYTES, ATOM4, true>(
        p, w, ring, [](int r, int lch) { return atom_off(r, lch); },
        [&](uint32_t kt, int key0) {
          step4(qt, kt, kt, pt, ps, red, p.scale_pre, o, m, l, key0 + BN4 <= w.kend,
                [&](int col, int) { return key0 + col < w.kend; });
        });
  } else {
    draft_block4(p, w, kring, qt, ps, red, o, m, l);
  }
  write_partials4(p, w, red, lane, g, wq, o, m, l);
#else
  __trap();
#endif
}

template <int STAGES>
constexpr ConfigEntry wgmma_entry() {
  static_assert(STAGES == 2, "name the new configuration below");
  return ConfigEntry{Cfg4<STAGES>::BM, STAGES, Cfg4<STAGES>::THREADS, Cfg4<STAGES>::SMEM, BN4,
                     "verify_wgmma_kernel<64,2>", &verify_wgmma_kernel<Cfg4<STAGES>::BM, STAGES>, ARCH_SM90A,
                     KV_BF16_BIT};
}

constexpr ConfigEntry wgmma_fp8_entry() {
  return ConfigEntry{Cfg4<2>::BM, 2, Cfg4<2>::THREADS, Cfg4<2>::SMEM, BN4, "verify_wgmma_kernel<64,2,true>",
                     &verify_wgmma_kernel<Cfg4<2>::BM, 2, true>, ARCH_SM90A, KV_FP8_BIT};
}

}  // namespace kdt
