// v1, the "narrow" kernel (impl cuda_narrow, forced only since the sm_120 kernel replaced it): BM = 32 rows,
// 16 keys per step, fits sm_120's 99 KB. Warp w owns row group w / 4 (16 rows) and quarter w % 4 of the dims for
// QK (partial S summed through shared memory) and of the 512 output columns for PV.
#pragma once
#include "../common/frame.cuh"

namespace kdt {

constexpr int BN = 16;                // keys per step
constexpr int ROW_ELEMS = D_QK + 8;   // smem row pitch in bf16 (16-byte pad: conflict-free ldmatrix)
constexpr int ROW_BYTES = ROW_ELEMS * 2;

template <int BM, int STAGES>
struct Cfg {
  static constexpr int GROUPS = BM / 16;
  static constexpr int WARPS = GROUPS * 4;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int Q_BYTES = BM * ROW_BYTES;
  static constexpr int K_BYTES = STAGES * BN * ROW_BYTES;
  static constexpr int S_BYTES = GROUPS * 4 * 16 * BN * 4;
  static constexpr int SMEM = Q_BYTES + K_BYTES + S_BYTES;
};

// Per-warp softmax state and output accumulator for its 16 rows x 128 columns.
struct WarpState {
  float acc[16][4];
  float m[2];  // running max (log2 domain) of rows lane/4 and lane/4 + 8
  float l[2];  // per-thread partial row sums
};

// One BN-key step: partial QK for this warp's dim quarter, reduce through smem, online softmax, PV.
// visible(col, row_in_group) says whether key column col (0..BN-1) is visible to that row.
template <int BM, typename Visible>
__device__ __forceinline__ void step(const __nv_bfloat16* qs, const __nv_bfloat16* ks, const __nv_bfloat16* vs,
                                     float* sred, float scale, WarpState& st, Visible visible) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = warp >> 2, c = warp & 3;
  float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
  const __nv_bfloat16* qrow = qs + (g * 16 + (lane & 15)) * ROW_ELEMS + (lane >> 4) * 8;
  const int mi = lane >> 3;
  const __nv_bfloat16* krow = ks + ((mi >> 1) * 8 + (lane & 7)) * ROW_ELEMS + (mi & 1) * 8;
#pragma unroll
  for (int kk = 0; kk < 9; ++kk) {
    const int d0 = c * 144 + kk * 16;
    uint32_t a[4], b[4];
    ldmatrix_x4(a, qrow + d0);
    ldmatrix_x4(b, krow + d0);
    mma_bf16(s[0], a, b[0], b[1]);
    mma_bf16(s[1], a, b[2], b[3]);
  }
  // Partial S -> smem [g][c][16][BN]
  float* mine = sred + ((g * 4 + c) * 16) * BN;
  const int r0 = lane >> 2, c0 = (lane & 3) * 2;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    *reinterpret_cast<float2*>(mine + r0 * BN + j * 8 + c0) = make_float2(s[j][0], s[j][1]);
    *reinterpret_cast<float2*>(mine + (r0 + 8) * BN + j * 8 + c0) = make_float2(s[j][2], s[j][3]);
  }
  __syncthreads();
  const float* grp = sred + (g * 4 * 16) * BN;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + (e >> 1) * 8, col = j * 8 + c0 + (e & 1);
      float v = 0.f;
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) v += grp[(cc * 16 + row) * BN + col];
      s[j][e] = visible(col, row) ? v * scale : -INFINITY;
    }
  }
  float alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[h], mx);
    const float base = (m_new == -INFINITY) ? 0.f : m_new;
    alpha[h] = exp2f(st.m[h] - base);
    st.m[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s[j][2 * h] = exp2f(s[j][2 * h] - base);
      s[j][2 * h + 1] = exp2f(s[j][2 * h + 1] - base);
      sum += s[j][2 * h] + s[j][2 * h + 1];
    }
    st.l[h] = st.l[h] * alpha[h] + sum;
  }
  uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]), pack_bf16(s[1][0], s[1][1]),
                    pack_bf16(s[1][2], s[1][3])};
  const __nv_bfloat16* vrow = vs + ((mi & 1) * 8 + (lane & 7)) * ROW_ELEMS + c * 128 + (mi >> 1) * 8;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    st.acc[nt][0] *= alpha[0]; st.acc[nt][1] *= alpha[0];
    st.acc[nt][2] *= alpha[1]; st.acc[nt][3] *= alpha[1];
  }
#pragma unroll
  for (int np = 0; np < 8; ++np) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, vrow + np * 16);
    mma_bf16(st.acc[2 * np], pa, b[0], b[1]);
    mma_bf16(st.acc[2 * np + 1], pa, b[2], b[3]);
  }
}

template <int BM, int STAGES>
__global__ void __launch_bounds__(Cfg<BM, STAGES>::THREADS, 1) verify_split_kernel(Params p) {
  using C = Cfg<BM, STAGES>;
  static_assert(STAGES >= 2, "the draft block needs two ring slots");
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* kring = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES);
  float* sred = reinterpret_cast<float*>(smem + C::Q_BYTES + C::K_BYTES);

  Work w;
  if (!setup_work<BM, C::THREADS>(p, BN, w)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = warp >> 2, c = warp & 3;
  auto padded = [](__nv_bfloat16* base) { return [base](int r, int ch) { return base + r * ROW_ELEMS + ch * 8; }; };
  load_q_tile<BM, C::THREADS>(p, w, padded(qs));

  WarpState st;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) st.acc[nt][0] = st.acc[nt][1] = st.acc[nt][2] = st.acc[nt][3] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;

  if (!w.draft) {
    const int ntiles = (w.kend - w.kbeg + BN - 1) / BN;
    auto load_tile = [&](int t) {
      __nv_bfloat16* dst = kring + (t % STAGES) * BN * ROW_ELEMS;
      for (int idx = tid; idx < BN * CHUNKS; idx += C::THREADS) {
        const int r = idx / CHUNKS, ch = idx % CHUNKS;
        const int64_t slot = pool_slot(p, w, w.kbeg + t * BN + r, ch == 0);
        cp_async_16(dst + r * ROW_ELEMS + ch * 8, p.kb + max(slot, (int64_t)0) * p.kb_s + ch * 8, slot >= 0);
      }
    };
#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) {
      if (t < ntiles) load_tile(t);
      cp_async_commit();  // group t (Q rides in group 0)
    }
    for (int t = 0; t < ntiles; ++t) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (t + STAGES - 1 < ntiles) load_tile(t + STAGES - 1);
      cp_async_commit();
      const __nv_bfloat16* ks = kring + (t % STAGES) * BN * ROW_ELEMS;
      const int key0 = w.kbeg + t * BN;
      step<BM>(qs, ks, ks, sred, p.scale_pre, st, [&](int col, int) { return key0 + col < w.kend; });
    }
  } else {
    // Draft block: K rows from k_extend into ring slot 0, V rows from v_extend into ring slot 1.
    __nv_bfloat16* ks = kring;
    __nv_bfloat16* vs = kring + BN * ROW_ELEMS;
    const DraftMask dm = draft_mask(p, w);
    draft_pipeline<BN, C::THREADS, false>(p, w, padded(ks), padded(vs), [&](int key0) {
      step<BM>(qs, ks, vs, sred, p.scale_draft, st, [&](int col, int row_in_group) {
        return draft_visible(dm, (w.row0 + g * 16 + row_in_group) / p.H, key0 + col);
      });
    });
  }
  cp_async_wait<0>();

  // Epilogue: complete the row sums across the quad, write normalised partial O and the log2-domain LSE.
  const float vscale = w.draft ? 1.f : p.v_scale;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int gr = w.row0 + g * 16 + (lane >> 2) + h * 8;
    if (gr < p.R)
      write_partial_row<16>(p, w.part0 + gr, st.m[h], l, vscale, c == 0 && (lane & 3) == 0, c * 128, st.acc, h);
  }
}

template <int BM, int STAGES>
constexpr ConfigEntry split_entry() {
  static_assert(BM == 32 && STAGES == 2, "name the new configuration below");
  return ConfigEntry{BM, STAGES, Cfg<BM, STAGES>::THREADS, Cfg<BM, STAGES>::SMEM, BN, "verify_split_kernel<32,2>",
                     &verify_split_kernel<BM, STAGES>, ARCH_MMA_SYNC, KV_BF16_BIT};
}

}  // namespace kdt
