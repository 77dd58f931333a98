#pragma once
#include "../common/frame.cuh"

namespace kdt {

// v3, 32-row warp tiles (the portable Hopper-sized kernel): BM = 64 rows, BN = 64 keys per step, 8 warps of up to 255 registers.
// Warp (q, c) = (warp / 4, warp % 4) owns rows [32q, 32q + 32) of the tile. QK: its rows x keys [16c, 16c + 16)
// over all 576 dims, so each K fragment serves two 16-row A fragments. PV: its rows x output columns
// [128c, 128c + 128) over all 64 keys (128 fp32 accumulators per thread), so each V fragment serves both row
// halves. Per 16-dim (QK) or 16-key (PV) slice a warp issues 3 ldmatrix per 4 HMMA and 10 per 32 HMMA (the wide
// kernel: 2 per 2 and 9 per 16). The four warps of a row half exchange row maxima and P (bf16) through shared
// memory behind a 128-thread named barrier; one block barrier per step guards the KV ring. Each thread loads
// one pool row's 18 chunks per tile, and fetches the pool slot of the tile after next during the current step.
constexpr int BN3 = 64;

template <int STAGES>
struct Cfg3 {
  static constexpr int BM = 64, WARPS = 8, THREADS = WARPS * 32;
  static constexpr int P_PITCH = BN3 + 8;
  static constexpr int Q_BYTES = BM * D_QK * 2;
  static constexpr int K_BYTES = STAGES * BN3 * D_QK * 2;
  static constexpr int P_BYTES = BM * P_PITCH * 2;
  static constexpr int R_BYTES = WARPS * 32 * 4;
  static constexpr int SMEM = Q_BYTES + K_BYTES + P_BYTES + R_BYTES;
};

struct State3 {
  float acc[2][16][4];  // [16-row half m][8-column n-tile][fragment]
  float m[2][2];        // reference max (log2 domain) of rows 16m + lane/4 + 8h of the warp's 32
  float l[2][2];        // this thread's partial row sums over its own keys, relative to m
};

// Per-thread shared-memory byte addresses that every step reuses (32-bit, so that the per-step offsets fold into
// the ldmatrix immediates). Swizzle: 16-byte chunk 8j + u of row r lives at chunk 8j + (u ^ (r & 7)); every row
// a lane addresses has r & 7 == lane & 7, so four bases per operand (u = 0..3) cover all 576 dims.
struct Addr3 {
  uint32_t q[4];  // Q A fragment (rows 32q + lane % 16), absolute
  uint32_t k[4];  // K B fragment (keys 16c + ...), relative to the K tile
  uint32_t v[4];  // V B fragment (transposed; keys lane % 16 of a 16-key slice), relative to the V tile
  uint32_t p;     // P A fragment (rows 32q + lane % 16), absolute
};

__device__ __forceinline__ Addr3 make_addr3(uint32_t qs, uint32_t ps) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, q = warp >> 2, c = warp & 3;
  const int mi = lane >> 3, sw = lane & 7, qh = lane >> 4, kh = mi & 1, vh = mi >> 1;
  Addr3 a;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    a.q[u] = qs + ((q * 32 + (lane & 15)) * D_QK + (((2 * u + qh) ^ sw) << 3)) * 2;
    a.k[u] = ((c * 16 + (mi >> 1) * 8 + (lane & 7)) * D_QK + (((2 * u + kh) ^ sw) << 3)) * 2;
    a.v[u] = (((mi & 1) * 8 + (lane & 7)) * D_QK + c * 128 + (((2 * u + vh) ^ sw) << 3)) * 2;
  }
  a.p = ps + ((q * 32 + (lane & 15)) * Cfg3<2>::P_PITCH + (lane >> 4) * 8) * 2;
  return a;
}

// One 64-key step. kt / vt: byte addresses of the K and V tiles. `full`: every key of the step is visible to
// every row (a prefix tile inside the split), so `visible(col, row)` is not consulted.
template <typename Visible>
__device__ __forceinline__ void step3(const Addr3& a, uint32_t kt, uint32_t vt, __nv_bfloat16* ps, float* red,
                                      float scale, State3& st, bool full, Visible visible) {
  constexpr int P_PITCH = Cfg3<2>::P_PITCH, ROW = D_QK * 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q = warp >> 2, c = warp & 3;
  const int r0 = lane >> 2, c0 = (lane & 3) * 2;
  float s[2][2][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) s[m][nt][0] = s[m][nt][1] = s[m][nt][2] = s[m][nt][3] = 0.f;
#pragma unroll
  for (int j = 0; j < D_QK / 64; ++j) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      uint32_t a0[4], a1[4], b[4];
      ldsm_x4(a0, a.q[u] + j * 128);
      ldsm_x4(a1, a.q[u] + 16 * ROW + j * 128);
      ldsm_x4(b, kt + a.k[u] + j * 128);
      mma_bf16(s[0][0], a0, b[0], b[1]);
      mma_bf16(s[0][1], a0, b[2], b[3]);
      mma_bf16(s[1][0], a1, b[0], b[1]);
      mma_bf16(s[1][1], a1, b[2], b[3]);
    }
  }
  float* myred = red + q * 4 * 32;
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[m][nt][e] = (full || visible(c * 16 + nt * 8 + c0 + (e & 1), q * 32 + m * 16 + r0 + (e >> 1) * 8))
                          ? s[m][nt][e] * scale : -INFINITY;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = fmaxf(fmaxf(s[m][0][2 * h], s[m][0][2 * h + 1]), fmaxf(s[m][1][2 * h], s[m][1][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      if ((lane & 3) == 0) myred[c * 32 + m * 16 + h * 8 + r0] = mx;
    }
  }
  bar_named(1 + q, 128);
  float alpha[2][2];
  bool bump_any = false;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = m * 16 + h * 8 + r0;
      const float mx = fmaxf(fmaxf(myred[rr], myred[32 + rr]), fmaxf(myred[64 + rr], myred[96 + rr]));
      const float m_old = st.m[m][h];
      const bool bump = mx > m_old + RESCALE_SLACK;  // the same decision in all four warps of the row half
      alpha[m][h] = bump ? exp2f(m_old - mx) : 1.f;
      bump_any |= bump;
      if (bump) st.m[m][h] = mx;
      const float base = st.m[m][h] == -INFINITY ? 0.f : st.m[m][h];
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float p0 = exp2f(s[m][nt][2 * h] - base), p1 = exp2f(s[m][nt][2 * h + 1] - base);
        sum += p0 + p1;
        *reinterpret_cast<uint32_t*>(ps + (q * 32 + rr) * P_PITCH + c * 16 + nt * 8 + c0) = pack_bf16(p0, p1);
      }
      st.l[m][h] = st.l[m][h] * alpha[m][h] + sum;
    }
  rescale_rows(st.acc, alpha, bump_any);
  bar_named(1 + q, 128);
#pragma unroll
  for (int k4 = 0; k4 < BN3 / 16; ++k4) {
    uint32_t pa0[4], pa1[4];
    ldsm_x4(pa0, a.p + k4 * 32);
    ldsm_x4(pa1, a.p + 16 * P_PITCH * 2 + k4 * 32);
#pragma unroll
    for (int np = 0; np < 8; ++np) {
      uint32_t b[4];
      ldsm_x4_trans(b, vt + a.v[np & 3] + k4 * 16 * ROW + (np >> 2) * 128);
      mma_bf16(st.acc[0][2 * np], pa0, b[0], b[1]);
      mma_bf16(st.acc[0][2 * np + 1], pa0, b[2], b[3]);
      mma_bf16(st.acc[1][2 * np], pa1, b[0], b[1]);
      mma_bf16(st.acc[1][2 * np + 1], pa1, b[2], b[3]);
    }
  }
}

template <int BM, int STAGES>
__global__ void __launch_bounds__(Cfg3<STAGES>::THREADS, 1) verify_rows32_kernel(Params p) {
  using C = Cfg3<STAGES>;
  static_assert(BM == C::BM && STAGES >= 2, "rows32 tiles are 64 rows; the draft block needs two ring slots");
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* kring = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES);
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES + C::K_BYTES);
  float* red = reinterpret_cast<float*>(smem + C::Q_BYTES + C::K_BYTES + C::P_BYTES);

  Work w;
  if (!setup_work<C::BM, C::THREADS>(p, BN3, w)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, q = warp >> 2, c = warp & 3;
  auto swizzled = [](__nv_bfloat16* base) { return [base](int r, int ch) { return base + swz(r, ch); }; };
  load_q_tile<C::BM, C::THREADS>(p, w, swizzled(qs));
  const uint32_t ring = smem_u32(kring);
  const Addr3 ad = make_addr3(smem_u32(qs), smem_u32(ps));
  State3 st;
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) st.acc[m][nt][0] = st.acc[m][nt][1] = st.acc[m][nt][2] = st.acc[m][nt][3] = 0.f;
    st.m[m][0] = st.m[m][1] = -INFINITY;
    st.l[m][0] = st.l[m][1] = 0.f;
  }

  if (!w.draft) {
    prefix_pipeline<STAGES, BN3, BN3 * D_QK * 2, 128, false>(
        p, w, ring, [](int r, int lch) { return (uint32_t)(r * D_QK * 2 + ((lch ^ (r & 7)) << 4)); },
        [&](uint32_t kt, int key0) {
          step3(ad, kt, kt, ps, red, p.scale_pre, st, key0 + BN3 <= w.kend,
                [&](int col, int) { return key0 + col < w.kend; });
        });
  } else {
    __nv_bfloat16* ks = kring;
    __nv_bfloat16* vs = kring + BN3 * D_QK;
    const DraftMask dm = draft_mask(p, w);
    draft_pipeline<BN3, C::THREADS, false>(p, w, swizzled(ks), swizzled(vs), [&](int key0) {
      step3(ad, ring, ring + BN3 * D_QK * 2, ps, red, p.scale_draft, st, false,
            [&](int col, int row) { return draft_visible(dm, (w.row0 + row) / p.H, key0 + col); });
    });
  }
  cp_async_wait<0>();
  // Row sums: each warp holds the sums over its own 16 keys of every step; add the four warps of its row half.
  __syncthreads();
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = st.l[m][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      if ((lane & 3) == 0) red[(q * 4 + c) * 32 + m * 16 + h * 8 + (lane >> 2)] = l;
    }
  __syncthreads();
  const float vscale = w.draft ? 1.f : p.v_scale;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = m * 16 + h * 8 + (lane >> 2);
      const float* rs = red + q * 4 * 32 + rr;
      const float l = rs[0] + rs[32] + rs[64] + rs[96];
      const int gr = w.row0 + q * 32 + rr;
      if (gr < p.R)
        write_partial_row<16>(p, w.part0 + gr, st.m[m][h], l, vscale, c == 0 && (lane & 3) == 0, c * 128,
                              st.acc[m], h);
    }
}

template <int STAGES>
constexpr ConfigEntry rows32_entry() {
  static_assert(STAGES == 2, "name the new configuration below");
  return ConfigEntry{Cfg3<STAGES>::BM, STAGES, Cfg3<STAGES>::THREADS, Cfg3<STAGES>::SMEM, BN3,
                     "verify_rows32_kernel<64,2>", &verify_rows32_kernel<Cfg3<STAGES>::BM, STAGES>, ARCH_MMA_SYNC,
                     KV_BF16_BIT};
}

}  // namespace kdt
