// kdtree-lab verify, v5: v4's warpgroup-MMA CTA with the two warpgroups out of step, so that one warpgroup's
// softmax runs while the other's wgmma keep the tensor cores busy (the "seesaw" order FlashMLA uses for dense MLA
// decode, here over a gathered page-size-1 pool loaded with cp.async). sm_90a only, like v4; the default on
// compute capability 9.x (impl cuda, or forced as cuda_wgmma_v5); an fp8 pool under it runs v4's e4m3 variant.
// docs/performance.md ("v5") has the schedule's reasoning, its prediction and what it measured.
//
// Prefix CTAs (64 rows, 256 threads): a 64-key step is two 32-key tiles, A (keys 0..31) and B (keys 32..63), each
// in its own 36 KB ring slot; warpgroup 0 loads and multiplies tile A (QK, m64n32k16 as in v4), warpgroup 1 tile B.
// The row reference maximum is a chain A(t) -> B(t) -> A(t + 1): warpgroup 0 decides A's from its own scores and
// B(t - 1)'s, publishes it and P_A, and warpgroup 1 decides B's after it. Each warpgroup holds the output columns
// 256g..256g+255 of all 64 rows (128 fp32 accumulators per thread) and multiplies both P_A V_A and P_B V_B into
// them. P of a tile (64 rows x 32 keys, bf16) is written over that tile's rope atom (dims 512..575, read by QK
// only and dead once QK is done) in the 64-byte swizzle, so P needs no buffer of its own and never races the
// other warpgroup's reads of the previous P. Each warpgroup's two slots form its own ring: tile X(t + 1) is
// loaded during step t, into the slot of X(t - 1), once the other warpgroup's PV on X(t - 1) has completed.
// Hand-offs are named barriers (bar.arrive by the producer, bar.sync by the consumer):
//   REF_A(t): warpgroup 0 -> 1, ref_A(t) and P_A(t) written;  REF_B(t): 1 -> 0, ref_B(t) and P_B(t) written;
//   FREE_A(t - 1): 1 -> 0, its PV on slot A(t - 1) done;      FREE_B(t - 1): 0 -> 1, likewise for B;
//   Q_g (step 0 only): warpgroup g's share of the Q tile (loaded by all 256 threads) has landed.
// A barrier both warpgroups would sync on from their different code is divergent (compute-sanitizer synccheck),
// hence one arrive / sync pair per direction; each warpgroup runs its own instantiation of the loop (v5_prefix<G>)
// because ptxas serializes every wgmma when one loop branches on the warpgroup around them.
// Draft-block CTAs run v4's draft block (draft_block4; the same shared-memory plan: Q, 144 KB of ring, v4's P tile,
// the row sums), and both kernels end in the same epilogue (write_partials4).
#pragma once
#include "wgmma_common.cuh"

namespace kdt {

constexpr int BN5 = 32;                      // keys per tile; a step is two tiles
constexpr int ATOM5 = BN5 * 128;             // one 32-row x 64-dim swizzle atom: 4 KB
constexpr int SLOT5 = (D_QK / 64) * ATOM5;   // a 32-key tile of 576 dims: 36 KB
constexpr int ROPE5 = (D_V / 64) * ATOM5;    // offset of the rope atom in a slot (where P of the tile goes)

struct Cfg5 {
  static constexpr int BM = 64, THREADS = 256, SLOTS = 4;
  static constexpr int Q_BYTES = Cfg4<2>::TILE_BYTES;
  static constexpr int K_BYTES = SLOTS * SLOT5;  // == v4's two 72 KB stages: the draft path reuses them
  static constexpr int P_BYTES = ATOM4;          // v4's P tile, for the draft block
  static constexpr int R_BYTES = 2 * 64 * 4;     // row sums of both warpgroups
  static constexpr int REF_BYTES = 2 * 64 * 4;   // ref_A and ref_B per row
  static constexpr int SMEM = Q_BYTES + K_BYTES + P_BYTES + R_BYTES + REF_BYTES + 1024;
  static_assert(K_BYTES == Cfg4<2>::K_BYTES, "the draft block runs v4's step over the same ring");
  static_assert(SMEM <= 232448, "v5 must fit the 227 KB a block may use on sm_90");
  static_assert(SMEM <= (1 << 18), "desc_advance needs every shared address below 256 KB");
};

// Named barriers (0 is __syncthreads, used only where both warpgroups run the same code): 1 + g a warpgroup's own,
// then the hand-offs.
constexpr int BAR_WG = 1, BAR_REF_A = 3, BAR_REF_B = 4, BAR_FREE_A = 5;  // FREE_B = BAR_FREE_A + 1
constexpr int BAR_Q = 7;  // 7 + g: step 0, warpgroup g's part of Q (loaded by all 256 threads) has landed

// Where the loaders put element (row, col) of a 32-row tile: atom col / 64, 128-byte rows, 128-byte swizzle.
__host__ __device__ constexpr uint32_t tile5_addr(int row, int col) {
  return (col / 64) * ATOM5 + row * 128 + ((((col / 8) % 8) ^ (row & 7)) << 4) + (col % 8) * 2;
}
// Where warpgroup g's softmax writes P element (row 0..63, key 0..31) of its tile, relative to the rope atom:
// 64-byte rows, 8-row groups 512 bytes apart, 16-byte chunk c at c ^ ((row & 7) >> 1) (the 64-byte swizzle).
__host__ __device__ constexpr uint32_t p5_addr(int row, int key) {
  return (row / 8) * 512 + (row % 8) * 64 + ((((key / 8) ^ ((row % 8) >> 1)) & 3) << 4) + (key % 8) * 2;
}
// PTX ISA's 64-byte swizzle (Swizzle<2,4,3>: address bits 4-5 XOR bits 7-8) and its K-major layout.
constexpr uint32_t sw64(uint32_t byte) { return byte ^ (((byte >> 7) & 3) << 4); }
constexpr uint32_t kmajor64_addr(uint32_t start, uint32_t sbo, int row, int k) {
  return sw64(start + (row % 8) * 64 + (row / 8) * sbo + (k % 8) * 2 + (k / 8) * 16);
}

constexpr bool layouts5_agree() {
  for (int kk = 0; kk < D_QK / 16; ++kk)  // QK: B = K, 32 keys of one slot, K-major, SBO 1 KB
    for (int row = 0; row < BN5; ++row)
      for (int k = 0; k < 16; ++k)
        if (kmajor_addr((kk >> 2) * ATOM5 + (kk & 3) * 32, 1024, row, k) != tile5_addr(row, kk * 16 + k)) return false;
  for (int g = 0; g < 2; ++g)             // PV: B = V of one slot, N-major, LBO one atom (4 KB), SBO 1 KB
    for (int kk = 0; kk < BN5 / 16; ++kk)
      for (int n = 0; n < 256; ++n)
        for (int k = 0; k < 16; ++k)
          if (mnmajor_addr(4 * g * ATOM5 + kk * 16 * 128, ATOM5, 1024, n, k) != tile5_addr(kk * 16 + k, 256 * g + n))
            return false;
  for (int kk = 0; kk < BN5 / 16; ++kk)   // PV: A = P (64 rows x 32 keys), K-major, 64-byte swizzle, SBO 512
    for (int row = 0; row < 64; ++row)
      for (int k = 0; k < 16; ++k)
        if (kmajor64_addr(kk * 32, 512, row, k) != p5_addr(row, kk * 16 + k)) return false;
  return p5_addr(63, 31) < ATOM5;         // P of a tile fits the rope atom it overwrites
}
static_assert(layouts5_agree(), "a v5 shared-memory writer disagrees with the wgmma descriptor that reads it");

// wgmma descriptor, 64-byte swizzle (mode 2): the P operand (every rope atom starts on a 512-byte boundary).
__device__ __forceinline__ uint64_t desc_sw64(uint32_t addr, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) |
         (2ull << 62);
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// o[64 x 256 of this warpgroup] += P[64 x 32] V[32 x 256]: P of the tile in `slot` (its rope atom), V its first 512
// dims, columns 256g.. .
__device__ __forceinline__ void pv5(float (&acc)[128], uint32_t slot, int g) {
  const uint64_t dp = desc_sw64(slot + ROPE5, 512), dv = desc_sw128(slot + 4 * g * ATOM5, ATOM5, 1024);
#pragma unroll
  for (int kk = 0; kk < BN5 / 16; ++kk) wgmma_pv(acc, desc_advance(dp, kk * 32), desc_advance(dv, kk * 16 * 128));
}
#endif

// Multiply the row sums by alpha[h] and the accumulators' rows with them (frame.cuh's lazy rescale_rows: only when
// some lane of the warp has a factor other than 1); this thread's rows are lane / 4 + 8h of its warp's 16.
__device__ __forceinline__ void rescale5(float (&o)[32][4], float (&l)[2], const float (&alpha)[2], bool bump) {
  l[0] *= alpha[0];
  l[1] *= alpha[1];
  rescale_rows<1, 32>(reinterpret_cast<float(&)[1][32][4]>(o), reinterpret_cast<const float(&)[1][2]>(alpha), bump);
}

// Adopt the reference maxima the other warpgroup published for this thread's rows r0, r0 + 8 (ref[r0 + 8h]): m[h]
// becomes it, alpha[h] the factor that brings accumulators and row sums from the old reference to it (1 where
// unchanged, also when both are -inf); returns whether any of the two rows changed.
__device__ __forceinline__ bool adopt_ref(const float* ref, int r0, float (&m)[2], float (&alpha)[2]) {
  bool bump = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float r = ref[r0 + 8 * h];
    alpha[h] = r == m[h] ? 1.f : exp2f(m[h] - r);
    bump |= r != m[h];
    m[h] = r;
  }
  return bump;
}

// The prefix loop of warpgroup G (0: tiles A, 1: tiles B); its own instantiation per warpgroup so that ptxas sees
// each warpgroup's wgmma pipeline on one path (a branch on the warpgroup inside one loop made it serialize every
// wgmma: ptxas C7514, "non wgmma instructions reading accumulator registers ... between start and end of the
// pipeline stage"). r0: this thread's rows are r0 and r0 + 8 (0..63), as the kernel computed them.
template <int G>
__device__ __forceinline__ void v5_prefix(const Params& p, const Work& w, uint32_t qt, uint32_t ring, float* refs,
                                          int r0, float (&o)[32][4], float (&m)[2], float (&l)[2]) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int g = G;
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  const int c0 = (lane & 3) * 2;  // this thread's rows are r0, r0 + 8; its columns c0, c0 + 1
  float(&acc)[128] = reinterpret_cast<float(&)[128]>(o);
  // This warpgroup's tiles: X(t) = tile 2t + g of the split, in slot 2 (t % 2) + g. Thread (wq, lane) loads
  // 16-byte chunks lch + 8k (k < 9) of rows wq * 8 + lane / 8 + 4i (i < 2): 8 lanes move 128 contiguous bytes.
  const int lch = lane & 7, lrow = wq * 8 + (lane >> 3);
  const int nsteps = (w.kend - w.kbeg + 2 * BN5 - 1) / (2 * BN5);
  auto key_of = [&](int t, int i) { return w.kbeg + (2 * t + g) * BN5 + lrow + 4 * i; };
  auto fetch = [&](int t, int64_t (&raw)[2]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) raw[i] = key_of(t, i) < w.kend ? p.kv_indices[w.kv0 + key_of(t, i)] : 0;
  };
  auto slot_of = [&](int t) { return ring + (2 * (t & 1) + g) * SLOT5; };
  auto load = [&](int t, const int64_t (&raw)[2]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = lrow + 4 * i;
      const bool ok = key_of(t, i) < w.kend;
      const int64_t slot = ok ? checked_slot(p, raw[i], lch == 0) : 0;
      const char* src = reinterpret_cast<const char*>(p.kb + slot * p.kb_s) + lch * 16;
      const uint32_t d = slot_of(t) + row * 128 + ((lch ^ (row & 7)) << 4);
#pragma unroll
      for (int k = 0; k < CHUNKS / 8; ++k) cp_async_16s(d + k * ATOM5, src + k * 128, ok ? 16 : 0);
    }
  };
  int64_t raw[2];
  fetch(0, raw);
  load(0, raw);
  cp_async_commit();  // Q (both warpgroups' rows) and X(0)
  fetch(1, raw);
  load(1, raw);
  cp_async_commit();  // X(1)
  fetch(2, raw);      // X(2), loaded in step 1
  const uint64_t dq = desc_sw128(qt, 16, 1024);
  for (int t = 0; t < nsteps; ++t) {
    const uint32_t mine = slot_of(t), theirs = ring + (2 * (t & 1) + 1 - g) * SLOT5;  // this step's A and B
    if (t == 0) {
      cp_async_wait<1>();
      fence_proxy_async();
      // Q is whole: each warpgroup waits for the other's arrival (an arrive / sync pair per direction, since the two
      // reach this point from different code, where a barrier both sync on would be divergent).
      bar_arrive(BAR_Q + G, 256);
      bar_named(BAR_Q + 1 - G, 256);
    } else {
      cp_async_wait<0>();
      fence_proxy_async();
      bar_named(BAR_WG + g, 128);  // X(t) is whole
    }
    float s[16];
    fence_regs(s);
    wgmma_fence();
    const uint64_t dk = desc_sw128(mine, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < D_QK / 16; ++kk) {
      wgmma_qk(s, desc_advance(dq, (kk >> 2) * ATOM4 + (kk & 3) * 32),
               desc_advance(dk, (kk >> 2) * ATOM5 + (kk & 3) * 32), kk > 0);
    }
    wgmma_commit();
    if (t >= 1 && t + 1 < nsteps) {
      wgmma_wait<1>();                          // this warpgroup's PV of step t - 1 is complete
      bar_arrive(BAR_FREE_A + 1 - g, 256);      // ... so the other's tile of step t - 1 may be refilled
      bar_named(BAR_FREE_A + g, 256);           // and the other's PV on my tile of step t - 1 is complete
      load(t + 1, raw);
      fetch(t + 2, raw);
    }
    cp_async_commit();
    wgmma_wait_all();
    fence_regs(s);
    fence_regs(acc);
    const int key0 = w.kbeg + (2 * t + g) * BN5;
    const bool full = key0 + BN5 <= w.kend;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = j * 8 + c0 + (e & 1);
        s[4 * j + e] = (full || key0 + col < w.kend) ? s[4 * j + e] * p.scale_pre : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * j + e]);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    }
    if constexpr (G == 1) {
      // ref_A(t) and P_A(t) from warpgroup 0: bring the accumulators to ref_A, then P_A V_A.
      bar_named(BAR_REF_A, 256);
      float alpha[2];
      const bool bump = adopt_ref(refs, r0, m, alpha);
      rescale5(o, l, alpha, bump);
      fence_regs(acc);
      wgmma_fence();
      pv5(acc, theirs, g);  // P_A V_A
      wgmma_commit();
    }
    // This warpgroup's tile: its reference maximum (the chain's next link), P, the row sums.
    float alpha[2];
    bool bump = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool up = mx[h] > m[h] + RESCALE_SLACK;
      alpha[h] = up ? exp2f(m[h] - mx[h]) : 1.f;
      bump |= up;
      if (up) m[h] = mx[h];
      if ((lane & 3) == 0) refs[64 * g + r0 + 8 * h] = m[h];
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float base = m[h] == -INFINITY ? 0.f : m[h];
        const float p0 = exp2f(s[4 * j + 2 * h] - base), p1 = exp2f(s[4 * j + 2 * h + 1] - base);
        sum[h] += p0 + p1;
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(mine + ROPE5 + p5_addr(r0 + 8 * h, j * 8 + c0)),
                     "r"(pack_bf16(p0, p1))
                     : "memory");
      }
    fence_proxy_async();
    if constexpr (G == 1) wgmma_wait_all();  // P_A V_A is complete: the accumulators may be rescaled
    fence_regs(acc);
    rescale5(o, l, alpha, bump);
    l[0] += sum[0];
    l[1] += sum[1];
    bar_named(BAR_WG + g, 128);               // all of this warpgroup's P is written
    bar_arrive(g == 0 ? BAR_REF_A : BAR_REF_B, 256);
    fence_regs(acc);
    wgmma_fence();
    pv5(acc, mine, g);
    wgmma_commit();
    if constexpr (G == 0) {
      // ref_B(t) and P_B(t) from warpgroup 1: bring the accumulators to ref_B, then P_B V_B.
      bar_named(BAR_REF_B, 256);
      float beta[2];
      const bool bumpb = adopt_ref(refs + 64, r0, m, beta);
      wgmma_wait_all();
      fence_regs(acc);
      rescale5(o, l, beta, bumpb);
      fence_regs(acc);
      wgmma_fence();
      pv5(acc, theirs, g);  // P_B V_B
      wgmma_commit();
    }
  }
  wgmma_wait_all();
  fence_regs(acc);
#endif
}

template <int BM>
__global__ void __launch_bounds__(Cfg5::THREADS, 1) verify_wgmma_v5_kernel(Params p) {
  using C = Cfg5;
  static_assert(BM == C::BM, "wgmma tiles are 64 rows");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);  // atoms on 1 KB boundaries
  unsigned char* qs = smem;
  unsigned char* kring = smem + C::Q_BYTES;
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES + C::K_BYTES);
  float* red = reinterpret_cast<float*>(smem + C::Q_BYTES + C::K_BYTES + C::P_BYTES);
  float* refs = red + 2 * 64;  // refs[0..63]: ref_A of the current step, refs[64..127]: ref_B

  Work w;
  if (!setup_work<C::BM, C::THREADS>(p, BN4, w)) return;  // split boundaries as v4's (multiples of 64 keys)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = warp >> 2, wq = warp & 3;
  const int r0 = wq * 16 + (lane >> 2);  // this thread's rows r0, r0 + 8
  load_q_tile<C::BM, C::THREADS>(p, w, atom_tile(qs));
  const uint32_t qt = smem_u32(qs), ring = smem_u32(kring);
  float o[32][4];
#pragma unroll
  for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  if (!w.draft) {
    if (g == 0)
      v5_prefix<0>(p, w, qt, ring, refs, r0, o, m, l);
    else
      v5_prefix<1>(p, w, qt, ring, refs, r0, o, m, l);
  } else {
    draft_block4(p, w, kring, qt, ps, red, o, m, l);
  }
  write_partials4(p, w, red, lane, g, wq, o, m, l);
#else
  __trap();
#endif
}

constexpr ConfigEntry wgmma_v5_entry() {
  return ConfigEntry{Cfg5::BM, Cfg5::SLOTS, Cfg5::THREADS, Cfg5::SMEM, BN4, "verify_wgmma_v5_kernel<64>",
                     &verify_wgmma_v5_kernel<Cfg5::BM>, ARCH_SM90A, KV_BF16_BIT};
}

}  // namespace kdt
