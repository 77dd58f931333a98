// kdtree-lab MLA tree-verify attention: split-K over the prefix + LSE reduce, mma.sync m16n8k16 (sm_80..sm_120).
//
// Work decomposition. For request b the R = N*H rows (draft node i, head h; row = i*H + h) are cut into row tiles
// of BM rows. Grid = (row_tiles, nsplit + 1, bs): splits 0..nsplit-1 cover the prefix (ranges computed on the
// device from kv_indptr), split `nsplit` is the N x N draft block read from k_extend / v_extend under the tree
// mask. Row tiles are the fastest grid dimension so the CTAs sharing one prefix range run together and read the
// latent KV from DRAM once. Each CTA keeps its Q tile in shared memory and streams BN = 16 key rows per step
// through a cp.async ring; one 576-wide key row serves QK (576 dims) and PV (its first 512 dims).
//
// Warps: warp w owns row group g = w / 4 (16 rows) and quarter c = w % 4. For QK it multiplies its 16 rows by
// the 16 keys over dims [144c, 144c + 144); the four partial S tiles are summed through shared memory. For PV it
// owns output columns [128c, 128c + 128). All four warps of a row group hold identical softmax state.
//
// A second kernel merges the nsplit + 1 partial results of each row with their log-sum-exps and writes bf16 o.
#include "kdtree_verify.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr int D_QK = 576;
constexpr int D_V = 512;
constexpr int BN = 16;                // keys per step
constexpr int ROW_ELEMS = D_QK + 8;   // smem row pitch in bf16 (16-byte pad: conflict-free ldmatrix)
constexpr int ROW_BYTES = ROW_ELEMS * 2;
constexpr int CHUNKS = D_QK / 8;      // 16-byte chunks per 576-wide row
constexpr int MIN_SPLIT_TOKENS = 128; // a prefix split covers at least this many tokens
constexpr int HEADER_BYTES = 256;
constexpr int MAX_NSPLIT = 512;
constexpr float LOG2E = 1.4426950408889634f;

struct Params {
  const __nv_bfloat16* q; int64_t q_st, q_sh;
  const __nv_bfloat16* kx; int64_t kx_s;
  const __nv_bfloat16* vx; int64_t vx_s;
  __nv_bfloat16* o; int64_t o_st, o_sh;
  const __nv_bfloat16* kb; int64_t kb_s; int64_t pool_rows;
  const void* qo; int qo64;
  const int32_t* kv_indptr; const int64_t* kv_indices;
  const uint8_t* mask; const int64_t* mask_indptr;
  int bs, N, H, R, nsplit;
  float scale_pre, scale_draft;  // log2-domain logit scales
  float v_scale;
  float* o_part; float* lse_part; unsigned int* status;
};

__device__ __forceinline__ int64_t load_qo(const Params& p, int i) {
  return p.qo64 ? reinterpret_cast<const int64_t*>(p.qo)[i] : (int64_t)reinterpret_cast<const int32_t*>(p.qo)[i];
}

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0 bytes read => the 16 destination bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(ptr)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(ptr)));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

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
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* kring = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES);
  float* sred = reinterpret_cast<float*>(smem + C::Q_BYTES + C::K_BYTES);

  const int tile = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = warp >> 2, c = warp & 3;
  const int64_t tok0 = load_qo(p, b);
  int n_b = (int)(load_qo(p, b + 1) - tok0);
  if (n_b > p.N) {
    if (tid == 0 && tile == 0 && split == 0) atomicOr(p.status, KDT_FLAG_QO_INDPTR);
    n_b = p.N;
  }
  if (n_b < 0) n_b = 0;
  const int rows_b = n_b * p.H;
  const int row0 = tile * BM;
  if (row0 >= p.R) return;  // past the last row tile of the largest request
  const int64_t kv0 = p.kv_indptr[b];
  const int L = p.kv_indptr[b + 1] - (int)kv0;
  const bool draft = split == p.nsplit;

  int kbeg = 0, kend = 0;
  if (draft) {
    kend = n_b;
  } else {
    int chunk = (L + p.nsplit - 1) / p.nsplit;
    chunk = ((chunk + BN - 1) / BN) * BN;
    if (chunk < MIN_SPLIT_TOKENS) chunk = MIN_SPLIT_TOKENS;
    kbeg = split * chunk;
    kend = min(L, kbeg + chunk);
  }
  const int64_t part0 = ((int64_t)b * (p.nsplit + 1) + split) * p.R;
  if (kbeg >= kend) {  // empty split: an LSE of -inf makes the reduce ignore it
    for (int r = tid; r < BM; r += C::THREADS)
      if (row0 + r < p.R) p.lse_part[part0 + row0 + r] = -INFINITY;
    return;
  }

  // Q tile -> smem (rows past this request's rows are zero-filled).
  for (int idx = tid; idx < BM * CHUNKS; idx += C::THREADS) {
    const int r = idx / CHUNKS, ch = idx % CHUNKS;
    const int gr = row0 + r;
    const bool ok = gr < rows_b;
    const int i = ok ? gr / p.H : 0, h = ok ? gr % p.H : 0;
    const __nv_bfloat16* src = p.q + (tok0 + i) * p.q_st + (int64_t)h * p.q_sh + ch * 8;
    cp_async_16(qs + r * ROW_ELEMS + ch * 8, ok ? src : p.q, ok);
  }

  WarpState st;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) st.acc[nt][0] = st.acc[nt][1] = st.acc[nt][2] = st.acc[nt][3] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;

  // Row -> draft node index of the two rows this thread's fragments touch, per row in group (0..15).
  auto node_of = [&](int row_in_group) { return (row0 + g * 16 + row_in_group) / p.H; };

  if (!draft) {
    const int ntiles = (kend - kbeg + BN - 1) / BN;
    auto load_tile = [&](int t) {
      __nv_bfloat16* dst = kring + (t % STAGES) * BN * ROW_ELEMS;
      const int key0 = kbeg + t * BN;
      for (int idx = tid; idx < BN * CHUNKS; idx += C::THREADS) {
        const int r = idx / CHUNKS, ch = idx % CHUNKS;
        const int key = key0 + r;
        const bool ok = key < kend;
        int64_t slot = ok ? p.kv_indices[kv0 + key] : 0;
        if (slot < 0 || slot >= p.pool_rows) {
          if (ch == 0) atomicOr(p.status, KDT_FLAG_INDEX_OUT_OF_POOL);
          slot = 0;
        }
        cp_async_16(dst + r * ROW_ELEMS + ch * 8, p.kb + slot * p.kb_s + ch * 8, ok);
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
      const int key0 = kbeg + t * BN;
      step<BM>(qs, ks, ks, sred, p.scale_pre, st, [&](int col, int) { return key0 + col < kend; });
    }
  } else {
    // Draft block: K rows from k_extend into ring slot 0, V rows from v_extend into ring slot 1.
    static_assert(STAGES >= 2, "the draft block needs two ring slots");
    __nv_bfloat16* ks = kring;
    __nv_bfloat16* vs = kring + BN * ROW_ELEMS;
    const int64_t m0 = p.mask ? p.mask_indptr[b] : 0;
    const int64_t mstride = (int64_t)L + n_b;
    for (int key0 = 0; key0 < n_b; key0 += BN) {
      __syncthreads();  // previous step done with ks / vs / sred
      for (int idx = tid; idx < BN * CHUNKS; idx += C::THREADS) {
        const int r = idx / CHUNKS, ch = idx % CHUNKS;
        const bool ok = key0 + r < n_b;
        const int64_t tok = tok0 + (ok ? key0 + r : 0);
        cp_async_16(ks + r * ROW_ELEMS + ch * 8, p.kx + tok * p.kx_s + ch * 8, ok);
        if (ch < D_V / 8) cp_async_16(vs + r * ROW_ELEMS + ch * 8, p.vx + tok * p.vx_s + ch * 8, ok);
      }
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      step<BM>(qs, ks, vs, sred, p.scale_draft, st, [&](int col, int row_in_group) {
        const int j = key0 + col;
        if (j >= n_b) return false;
        const int i = node_of(row_in_group);
        if (i >= n_b) return false;
        if (p.mask == nullptr) return j <= i;
        return p.mask[m0 + (int64_t)i * mstride + L + j] != 0;
      });
    }
  }
  cp_async_wait<0>();

  // Epilogue: complete the row sums across the quad, write normalised partial O and the log2-domain LSE.
  const float vscale = draft ? 1.f : p.v_scale;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int gr = row0 + g * 16 + (lane >> 2) + h * 8;
    if (gr >= p.R) continue;
    const float inv = l > 0.f ? vscale / l : 0.f;
    const int64_t prow = part0 + gr;
    if (c == 0 && (lane & 3) == 0) p.lse_part[prow] = l > 0.f ? st.m[h] + log2f(l) : -INFINITY;
    float* dst = p.o_part + prow * D_V + c * 128 + (lane & 3) * 2;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
      *reinterpret_cast<float2*>(dst + nt * 8) = make_float2(st.acc[nt][2 * h] * inv, st.acc[nt][2 * h + 1] * inv);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Wide variant (experimental, Hopper-sized shared memory): BN = 64 keys per step, QK split over keys instead of
// dims. Warp (g, c) computes S for its 16 rows x keys [16c, 16c + 16) over all 576 dims, so no partial-S
// reduction: only the row maxima are exchanged, P goes through shared memory in bf16, and PV runs over all 64
// keys for the warp's 128 output columns. Three barriers per 64 keys (the narrow kernel: two per 16). Rows of
// Q and K are stored unpadded with the 16-byte chunks XOR-swizzled by (row & 7), which keeps ldmatrix
// conflict-free and saves the padding the 231 KB budget has no room for.
constexpr int BNW = 64;

__device__ __forceinline__ int swz(int row, int chunk) { return row * D_QK + ((chunk ^ (row & 7)) << 3); }

template <int BM, int STAGES>
struct CfgW {
  static constexpr int GROUPS = BM / 16;
  static constexpr int WARPS = GROUPS * 4;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int P_PITCH = BNW + 8;
  static constexpr int Q_BYTES = BM * D_QK * 2;
  static constexpr int K_BYTES = STAGES * BNW * D_QK * 2;
  static constexpr int P_BYTES = BM * P_PITCH * 2;
  static constexpr int R_BYTES = GROUPS * 4 * 16 * 4;
  static constexpr int SMEM = Q_BYTES + K_BYTES + P_BYTES + R_BYTES;
};

template <int BM, typename Visible>
__device__ __forceinline__ void step_wide(const __nv_bfloat16* qs, const __nv_bfloat16* ks, const __nv_bfloat16* vs,
                                          __nv_bfloat16* ps, float* red, float scale, WarpState& st,
                                          Visible visible) {
  constexpr int P_PITCH = BNW + 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = warp >> 2, c = warp & 3;
  const int mi = lane >> 3, r0 = lane >> 2, c0 = (lane & 3) * 2;
  float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
  const int qrow = g * 16 + (lane & 15), qhalf = lane >> 4;
  const int krow = c * 16 + (mi >> 1) * 8 + (lane & 7), khalf = mi & 1;
#pragma unroll 6
  for (int kk = 0; kk < D_QK / 16; ++kk) {
    uint32_t a[4], b[4];
    ldmatrix_x4(a, qs + swz(qrow, kk * 2 + qhalf));
    ldmatrix_x4(b, ks + swz(krow, kk * 2 + khalf));
    mma_bf16(s[0], a, b[0], b[1]);
    mma_bf16(s[1], a, b[2], b[3]);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      s[j][e] = visible(c * 16 + j * 8 + c0 + (e & 1), r0 + (e >> 1) * 8) ? s[j][e] * scale : -INFINITY;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if ((lane & 3) == 0) red[(g * 4 + c) * 16 + r0 + h * 8] = mx;
  }
  __syncthreads();
  float alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) mx = fmaxf(mx, red[(g * 4 + cc) * 16 + r0 + h * 8]);
    const float m_new = fmaxf(st.m[h], mx);
    const float base = (m_new == -INFINITY) ? 0.f : m_new;
    alpha[h] = exp2f(st.m[h] - base);
    st.m[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float p0 = exp2f(s[j][2 * h] - base), p1 = exp2f(s[j][2 * h + 1] - base);
      sum += p0 + p1;
      *reinterpret_cast<uint32_t*>(ps + (g * 16 + r0 + h * 8) * P_PITCH + c * 16 + j * 8 + c0) = pack_bf16(p0, p1);
    }
    st.l[h] = st.l[h] * alpha[h] + sum;
  }
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    st.acc[nt][0] *= alpha[0]; st.acc[nt][1] *= alpha[0];
    st.acc[nt][2] *= alpha[1]; st.acc[nt][3] *= alpha[1];
  }
  __syncthreads();
  const __nv_bfloat16* prow = ps + (g * 16 + (lane & 15)) * P_PITCH + (lane >> 4) * 8;
#pragma unroll
  for (int k4 = 0; k4 < BNW / 16; ++k4) {
    uint32_t pa[4];
    ldmatrix_x4(pa, prow + k4 * 16);
    const int vrow = k4 * 16 + (mi & 1) * 8 + (lane & 7);
#pragma unroll
    for (int np = 0; np < 8; ++np) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, vs + swz(vrow, c * 16 + np * 2 + (mi >> 1)));
      mma_bf16(st.acc[2 * np], pa, b[0], b[1]);
      mma_bf16(st.acc[2 * np + 1], pa, b[2], b[3]);
    }
  }
}

template <int BM, int STAGES>
__global__ void __launch_bounds__(CfgW<BM, STAGES>::THREADS, 1) verify_wide_kernel(Params p) {
  using C = CfgW<BM, STAGES>;
  static_assert(STAGES >= 2, "the draft block needs two ring slots");
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* kring = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES);
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + C::Q_BYTES + C::K_BYTES);
  float* red = reinterpret_cast<float*>(smem + C::Q_BYTES + C::K_BYTES + C::P_BYTES);

  const int tile = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = warp >> 2, c = warp & 3;
  const int64_t tok0 = load_qo(p, b);
  int n_b = (int)(load_qo(p, b + 1) - tok0);
  if (n_b > p.N) {
    if (tid == 0 && tile == 0 && split == 0) atomicOr(p.status, KDT_FLAG_QO_INDPTR);
    n_b = p.N;
  }
  if (n_b < 0) n_b = 0;
  const int rows_b = n_b * p.H;
  const int row0 = tile * BM;
  if (row0 >= p.R) return;
  const int64_t kv0 = p.kv_indptr[b];
  const int L = p.kv_indptr[b + 1] - (int)kv0;
  const bool draft = split == p.nsplit;
  int kbeg = 0, kend = 0;
  if (draft) {
    kend = n_b;
  } else {
    int chunk = (L + p.nsplit - 1) / p.nsplit;
    chunk = ((chunk + BN - 1) / BN) * BN;
    if (chunk < MIN_SPLIT_TOKENS) chunk = MIN_SPLIT_TOKENS;
    kbeg = split * chunk;
    kend = min(L, kbeg + chunk);
  }
  const int64_t part0 = ((int64_t)b * (p.nsplit + 1) + split) * p.R;
  if (kbeg >= kend) {
    for (int r = tid; r < BM; r += C::THREADS)
      if (row0 + r < p.R) p.lse_part[part0 + row0 + r] = -INFINITY;
    return;
  }
  for (int idx = tid; idx < BM * CHUNKS; idx += C::THREADS) {
    const int r = idx / CHUNKS, ch = idx % CHUNKS;
    const int gr = row0 + r;
    const bool ok = gr < rows_b;
    const int i = ok ? gr / p.H : 0, h = ok ? gr % p.H : 0;
    cp_async_16(qs + swz(r, ch), ok ? p.q + (tok0 + i) * p.q_st + (int64_t)h * p.q_sh + ch * 8 : p.q, ok);
  }
  WarpState st;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) st.acc[nt][0] = st.acc[nt][1] = st.acc[nt][2] = st.acc[nt][3] = 0.f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
  auto node_of = [&](int row_in_group) { return (row0 + g * 16 + row_in_group) / p.H; };

  if (!draft) {
    const int ntiles = (kend - kbeg + BNW - 1) / BNW;
    auto load_tile = [&](int t) {
      __nv_bfloat16* dst = kring + (t % STAGES) * BNW * D_QK;
      const int key0 = kbeg + t * BNW;
      for (int idx = tid; idx < BNW * CHUNKS; idx += C::THREADS) {
        const int r = idx / CHUNKS, ch = idx % CHUNKS;
        const int key = key0 + r;
        const bool ok = key < kend;
        int64_t slot = ok ? p.kv_indices[kv0 + key] : 0;
        if (slot < 0 || slot >= p.pool_rows) {
          if (ch == 0) atomicOr(p.status, KDT_FLAG_INDEX_OUT_OF_POOL);
          slot = 0;
        }
        cp_async_16(dst + swz(r, ch), p.kb + slot * p.kb_s + ch * 8, ok);
      }
    };
#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) {
      if (t < ntiles) load_tile(t);
      cp_async_commit();
    }
    for (int t = 0; t < ntiles; ++t) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (t + STAGES - 1 < ntiles) load_tile(t + STAGES - 1);
      cp_async_commit();
      const __nv_bfloat16* ks = kring + (t % STAGES) * BNW * D_QK;
      const int key0 = kbeg + t * BNW;
      step_wide<BM>(qs, ks, ks, ps, red, p.scale_pre, st, [&](int col, int) { return key0 + col < kend; });
    }
  } else {
    __nv_bfloat16* ks = kring;
    __nv_bfloat16* vs = kring + BNW * D_QK;
    const int64_t m0 = p.mask ? p.mask_indptr[b] : 0;
    const int64_t mstride = (int64_t)L + n_b;
    for (int key0 = 0; key0 < n_b; key0 += BNW) {
      __syncthreads();
      for (int idx = tid; idx < BNW * CHUNKS; idx += C::THREADS) {
        const int r = idx / CHUNKS, ch = idx % CHUNKS;
        const bool ok = key0 + r < n_b;
        const int64_t tok = tok0 + (ok ? key0 + r : 0);
        cp_async_16(ks + swz(r, ch), p.kx + tok * p.kx_s + ch * 8, ok);
        if (ch < D_V / 8) cp_async_16(vs + swz(r, ch), p.vx + tok * p.vx_s + ch * 8, ok);
      }
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      step_wide<BM>(qs, ks, vs, ps, red, p.scale_draft, st, [&](int col, int row_in_group) {
        const int j = key0 + col;
        if (j >= n_b) return false;
        const int i = node_of(row_in_group);
        if (i >= n_b) return false;
        if (p.mask == nullptr) return j <= i;
        return p.mask[m0 + (int64_t)i * mstride + L + j] != 0;
      });
    }
  }
  cp_async_wait<0>();
  // Row sums: each warp holds the sum over its own 16 keys of every step; add the four warps of the group.
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if ((lane & 3) == 0) red[(g * 4 + c) * 16 + (lane >> 2) + h * 8] = l;
  }
  __syncthreads();
  const float vscale = draft ? 1.f : p.v_scale;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int rr = (lane >> 2) + h * 8;
    float l = 0.f;
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) l += red[(g * 4 + cc) * 16 + rr];
    const int gr = row0 + g * 16 + rr;
    if (gr >= p.R) continue;
    const float inv = l > 0.f ? vscale / l : 0.f;
    const int64_t prow = part0 + gr;
    if (c == 0 && (lane & 3) == 0) p.lse_part[prow] = l > 0.f ? st.m[h] + log2f(l) : -INFINITY;
    float* dst = p.o_part + prow * D_V + c * 128 + (lane & 3) * 2;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
      *reinterpret_cast<float2*>(dst + nt * 8) = make_float2(st.acc[nt][2 * h] * inv, st.acc[nt][2 * h + 1] * inv);
  }
}

// Merge the nsplit + 1 partials of one row (b, r = i*H + h) and write bf16 o. 128 threads x 4 columns.
__global__ void __launch_bounds__(128) verify_reduce_kernel(Params p) {
  const int r = blockIdx.x, b = blockIdx.y;
  const int64_t tok0 = load_qo(p, b);
  int n_b = (int)(load_qo(p, b + 1) - tok0);
  n_b = max(0, min(n_b, p.N));
  if (r >= n_b * p.H) return;
  const int i = r / p.H, h = r % p.H;
  const int S = p.nsplit + 1;
  const int64_t part0 = (int64_t)b * S * p.R + r;
  float m = -INFINITY;
  for (int s = 0; s < S; ++s) m = fmaxf(m, p.lse_part[part0 + (int64_t)s * p.R]);
  const int col = threadIdx.x * 4;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  float wsum = 0.f;
  if (m != -INFINITY) {
    for (int s = 0; s < S; ++s) {
      const float lse = p.lse_part[part0 + (int64_t)s * p.R];
      if (lse == -INFINITY) continue;
      const float w = exp2f(lse - m);
      wsum += w;
      const float4 v = *reinterpret_cast<const float4*>(p.o_part + (part0 + (int64_t)s * p.R) * D_V + col);
      acc[0] += w * v.x; acc[1] += w * v.y; acc[2] += w * v.z; acc[3] += w * v.w;
    }
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  __nv_bfloat16* dst = p.o + (tok0 + i) * p.o_st + (int64_t)h * p.o_sh + col;
#pragma unroll
  for (int e = 0; e < 4; ++e) dst[e] = __float2bfloat16(acc[e] * inv);
}

struct ConfigEntry {
  kdt_config cfg;
  void (*kernel)(Params);
};

template <int BM, int STAGES>
constexpr ConfigEntry make_entry() {
  return ConfigEntry{{BM, STAGES, Cfg<BM, STAGES>::THREADS, Cfg<BM, STAGES>::SMEM, BN},
                     &verify_split_kernel<BM, STAGES>};
}

template <int BM, int STAGES>
constexpr ConfigEntry make_wide_entry() {
  return ConfigEntry{{BM, STAGES, CfgW<BM, STAGES>::THREADS, CfgW<BM, STAGES>::SMEM, BNW},
                     &verify_wide_kernel<BM, STAGES>};
}

// Automatic selection takes the first entry that fits the device's opt-in shared memory; the wide kernel is
// listed last (reachable through kdtree_verify_force_config) until it has been proven on a GPU.
const ConfigEntry kConfigs[] = {make_entry<64, 3>(), make_entry<32, 2>(), make_wide_entry<64, 2>()};
constexpr int kNumAutoConfigs = 2;
constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

constexpr int kMaxDevices = 64;
int g_config_of_device[kMaxDevices];      // 0 = unknown, else index + 1
unsigned g_attr_set[kMaxDevices];         // bit i: config i's shared-memory attribute is set on that device
int g_forced_config = -1;                 // kdtree_verify_force_config

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

extern "C" {

size_t kdtree_verify_workspace_bytes(int max_bs, int num_draft, int num_heads, int nsplit) {
  if (max_bs < 1 || num_draft < 1 || num_heads < 1 || nsplit < 1) return 0;
  const size_t rows = (size_t)max_bs * (size_t)(nsplit + 1) * (size_t)num_draft * (size_t)num_heads;
  return HEADER_BYTES + rows * D_V * sizeof(float) + ((rows * sizeof(float) + 255) / 256) * 256;
}

int kdtree_verify_num_configs(void) { return kNumConfigs; }

int kdtree_verify_config(int index, kdt_config* out) {
  if (out == nullptr) return KDT_ERR_NULL_POINTER;
  if (index < 0 || index >= kNumConfigs) return KDT_ERR_BAD_SHAPE;
  *out = kConfigs[index].cfg;
  return KDT_OK;
}

int kdtree_verify_select_config(int smem_optin_bytes) {
  for (int i = 0; i < kNumAutoConfigs; ++i)
    if (kConfigs[i].cfg.dynamic_smem <= smem_optin_bytes) return i;
  return -1;
}

int kdtree_verify_abi_version(void) { return KDT_ABI_VERSION; }

int kdtree_verify_force_config(int index) {
  if (index < -1 || index >= kNumConfigs) return KDT_ERR_BAD_SHAPE;
  g_forced_config = index;
  return KDT_OK;
}

const char* kdtree_verify_strerror(int status) {
  switch (status) {
    case KDT_OK: return "ok";
    case KDT_ERR_NULL_POINTER: return "a required pointer is NULL";
    case KDT_ERR_BAD_SHAPE: return "bs, num_draft, num_heads or nsplit is out of range";
    case KDT_ERR_BAD_STRIDE: return "a stride or base pointer breaks the 16-byte alignment the kernel loads need";
    case KDT_ERR_BAD_DTYPE: return "unknown dtype code";
    case KDT_ERR_WORKSPACE: return "workspace is NULL, not 16-byte aligned, or smaller than kdtree_verify_workspace_bytes()";
    case KDT_ERR_UNSUPPORTED: return "unsupported by this build (fp8 KV pools are not served yet)";
    case KDT_ERR_LAUNCH: return "the CUDA kernel launch failed";
    case KDT_ERR_DEVICE: return "device query failed or the GPU has too little shared memory per block";
    default: return "unknown kdtree-lab status";
  }
}

int kdtree_verify_attn_flash_paged_cg(
    const void* q, int64_t q_stride_token, int64_t q_stride_head, const void* k_extend, int64_t k_extend_stride,
    const void* v_extend, int64_t v_extend_stride, void* o, int64_t o_stride_token, int64_t o_stride_head,
    const void* k_buffer, int64_t k_buffer_stride, int64_t pool_rows, int kv_dtype, const void* qo_indptr,
    int qo_indptr_is_int64, const int32_t* kv_indptr, const int64_t* kv_indices, const uint8_t* custom_mask,
    const int64_t* mask_indptr, int bs, int num_draft, int num_heads, int nsplit, float sm_scale, float k_scale,
    float v_scale, void* workspace, size_t workspace_bytes, void* stream) {
  if (!q || !k_extend || !v_extend || !o || !k_buffer || !qo_indptr || !kv_indptr || !kv_indices || !workspace)
    return KDT_ERR_NULL_POINTER;
  if (custom_mask && !mask_indptr) return KDT_ERR_NULL_POINTER;
  if (bs < 1 || num_draft < 1 || num_draft > 1024 || num_heads < 1 || num_heads > 1024 || nsplit < 1 ||
      nsplit > MAX_NSPLIT || pool_rows < 1 || (int64_t)num_draft * num_heads > (1 << 20) || bs > 65535)
    return KDT_ERR_BAD_SHAPE;
  if (kv_dtype != KDT_KV_BF16 && kv_dtype != KDT_KV_FP8_E4M3) return KDT_ERR_BAD_DTYPE;
  if (kv_dtype != KDT_KV_BF16) return KDT_ERR_UNSUPPORTED;
  if (!aligned16(q) || !aligned16(k_extend) || !aligned16(v_extend) || !aligned16(k_buffer) ||
      q_stride_token % 8 || q_stride_head % 8 || k_extend_stride % 8 || v_extend_stride % 8 || k_buffer_stride % 8 ||
      q_stride_token < 1 || q_stride_head < 1 || k_extend_stride < D_QK || v_extend_stride < D_V ||
      k_buffer_stride < D_QK || o_stride_token < 1 || o_stride_head < 1)
    return KDT_ERR_BAD_STRIDE;
  if (!aligned16(workspace) || workspace_bytes < kdtree_verify_workspace_bytes(bs, num_draft, num_heads, nsplit))
    return KDT_ERR_WORKSPACE;

  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return KDT_ERR_DEVICE;
  int optin = 0;
  if (g_config_of_device[dev] == 0) {
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
      return KDT_ERR_DEVICE;
    const int auto_idx = kdtree_verify_select_config(optin);
    if (auto_idx < 0) return KDT_ERR_DEVICE;
    g_config_of_device[dev] = auto_idx + 1;
  }
  const int idx = g_forced_config >= 0 ? g_forced_config : g_config_of_device[dev] - 1;
  if (!(g_attr_set[dev] & (1u << idx))) {
    if (cudaFuncSetAttribute(reinterpret_cast<const void*>(kConfigs[idx].kernel),
                             cudaFuncAttributeMaxDynamicSharedMemorySize, kConfigs[idx].cfg.dynamic_smem) !=
        cudaSuccess) {
      cudaGetLastError();  // clear the non-sticky error: a forced config too large for this GPU
      return KDT_ERR_DEVICE;
    }
    g_attr_set[dev] |= 1u << idx;
  }
  const ConfigEntry& ce = kConfigs[idx];

  Params p;
  p.q = static_cast<const __nv_bfloat16*>(q); p.q_st = q_stride_token; p.q_sh = q_stride_head;
  p.kx = static_cast<const __nv_bfloat16*>(k_extend); p.kx_s = k_extend_stride;
  p.vx = static_cast<const __nv_bfloat16*>(v_extend); p.vx_s = v_extend_stride;
  p.o = static_cast<__nv_bfloat16*>(o); p.o_st = o_stride_token; p.o_sh = o_stride_head;
  p.kb = static_cast<const __nv_bfloat16*>(k_buffer); p.kb_s = k_buffer_stride; p.pool_rows = pool_rows;
  p.qo = qo_indptr; p.qo64 = qo_indptr_is_int64 ? 1 : 0;
  p.kv_indptr = kv_indptr; p.kv_indices = kv_indices; p.mask = custom_mask; p.mask_indptr = mask_indptr;
  p.bs = bs; p.N = num_draft; p.H = num_heads; p.R = num_draft * num_heads; p.nsplit = nsplit;
  p.scale_pre = sm_scale * k_scale * LOG2E; p.scale_draft = sm_scale * LOG2E; p.v_scale = v_scale;
  unsigned char* ws = static_cast<unsigned char*>(workspace);
  const size_t rows = (size_t)bs * (nsplit + 1) * p.R;
  p.status = reinterpret_cast<unsigned int*>(ws);
  p.o_part = reinterpret_cast<float*>(ws + HEADER_BYTES);
  p.lse_part = reinterpret_cast<float*>(ws + HEADER_BYTES + rows * D_V * sizeof(float));

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const dim3 grid((p.R + ce.cfg.block_m - 1) / ce.cfg.block_m, nsplit + 1, bs);
  ce.kernel<<<grid, ce.cfg.threads, ce.cfg.dynamic_smem, s>>>(p);
  if (cudaGetLastError() != cudaSuccess) return KDT_ERR_LAUNCH;
  verify_reduce_kernel<<<dim3(p.R, bs), 128, 0, s>>>(p);
  if (cudaGetLastError() != cudaSuccess) return KDT_ERR_LAUNCH;
  return KDT_OK;
}

}  // extern "C"
