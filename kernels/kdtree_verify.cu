// kdtree-lab MLA tree-verify attention: split-K over the prefix + LSE reduce, mma.sync m16n8k16 (sm_80..sm_120).
//
// Work decomposition. For request b the R = N*H rows (draft node i, head h; row = i*H + h) are cut into row tiles
// of BM rows. Grid = (row_tiles, nsplit + 1, bs): splits 0..nsplit-1 cover the prefix (ranges computed on the
// device from kv_indptr), split `nsplit` is the N x N draft block read from k_extend / v_extend under the tree
// mask. Row tiles are the fastest grid dimension so the CTAs sharing one prefix range run together and read the
// latent KV from DRAM once. Each CTA keeps its Q tile in shared memory and streams key rows through a cp.async
// ring; one 576-wide key row serves QK (576 dims) and PV (its first 512 dims).
//
// Three kernels share that frame (and the prologue and pipeline helpers below):
// - verify_split_kernel (v1, "narrow"; BM = 64 or 32, 16 keys per step): fits sm_120's 99 KB. Warp w owns row
//   group w / 4 (16 rows) and quarter w % 4 of the dims for QK (partial S summed through shared memory) and of
//   the 512 output columns for PV.
// - verify_rows32_kernel (v3; BM = 64, 64 keys per step, 231 KB): the mma.sync kernel for Hopper-sized shared
//   memory, described at its definition.
// - verify_wgmma_kernel (v4; kdtree_verify_sm90.cuh): the same tiles with sm_90a warpgroup MMA, the default on
//   compute capability 9.x.
// A third kernel merges the nsplit + 1 partial results of each row with their log-sum-exps and writes bf16 o.
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

__device__ __forceinline__ void cp_async_16s(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  cp_async_16s(smem_u32(dst), src, valid ? 16 : 0);  // 0 bytes read => the 16 destination bytes are zero-filled
}
// Make shared-memory writes of the generic proxy (st.shared, cp.async) visible to wgmma's async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* ptr) { ldsm_x4(r, smem_u32(ptr)); }
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* ptr) {
  ldsm_x4_trans(r, smem_u32(ptr));
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

// Where one CTA works: request b's rows [row0, row0 + BM) against one prefix split or the draft block.
struct Work {
  int64_t tok0, kv0, part0;
  int n_b, rows_b, L, kbeg, kend, row0;
  bool draft;
};

// Fills `w` for CTA (row tile, split, request) = blockIdx; returns false when the CTA has nothing to compute:
// past the request's last row tile, or an empty split (it writes an LSE of -inf, which the reduce ignores).
// Prefix split boundaries are multiples of `gran` tokens and cover at least MIN_SPLIT_TOKENS.
template <int BM, int THREADS>
__device__ __forceinline__ bool setup_work(const Params& p, int gran, Work& w) {
  const int tile = blockIdx.x, split = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
  w.tok0 = load_qo(p, b);
  int n_b = (int)(load_qo(p, b + 1) - w.tok0);
  if (n_b > p.N) {
    if (tid == 0 && tile == 0 && split == 0) atomicOr(p.status, KDT_FLAG_QO_INDPTR);
    n_b = p.N;
  }
  w.n_b = max(n_b, 0);
  w.rows_b = w.n_b * p.H;
  w.row0 = tile * BM;
  if (w.row0 >= p.R) return false;
  w.kv0 = p.kv_indptr[b];
  w.L = p.kv_indptr[b + 1] - (int)w.kv0;
  w.draft = split == p.nsplit;
  w.kbeg = 0;
  w.kend = w.n_b;
  if (!w.draft) {
    int chunk = (w.L + p.nsplit - 1) / p.nsplit;
    chunk = max(((chunk + gran - 1) / gran) * gran, MIN_SPLIT_TOKENS);
    w.kbeg = split * chunk;
    w.kend = min(w.L, w.kbeg + chunk);
  }
  w.part0 = ((int64_t)b * (p.nsplit + 1) + split) * p.R;
  if (w.kbeg >= w.kend) {
    for (int r = tid; r < BM; r += THREADS)
      if (w.row0 + r < p.R) p.lse_part[w.part0 + w.row0 + r] = -INFINITY;
    return false;
  }
  return true;
}

// Q rows [row0, row0 + BM) of the request -> shared memory at addr(row, chunk); rows past the request's are zeros.
template <int BM, int THREADS, typename Addr>
__device__ __forceinline__ void load_q_tile(const Params& p, const Work& w, Addr addr) {
  for (int idx = threadIdx.x; idx < BM * CHUNKS; idx += THREADS) {
    const int r = idx / CHUNKS, ch = idx % CHUNKS;
    const int gr = w.row0 + r;
    const bool ok = gr < w.rows_b;
    const int i = ok ? gr / p.H : 0, h = ok ? gr % p.H : 0;
    cp_async_16(addr(r, ch), ok ? p.q + (w.tok0 + i) * p.q_st + (int64_t)h * p.q_sh + ch * 8 : p.q, ok);
  }
}

// The draft block, ROWS keys per step: K rows from k_extend to kaddr(row, chunk), V rows from v_extend to
// vaddr(row, chunk), then step(key0). ASYNC_PROXY: fence the cp.async writes for wgmma before the barrier.
template <int ROWS, int THREADS, bool ASYNC_PROXY, typename KAddr, typename VAddr, typename Step>
__device__ __forceinline__ void draft_pipeline(const Params& p, const Work& w, KAddr kaddr, VAddr vaddr, Step step) {
  for (int key0 = 0; key0 < w.n_b; key0 += ROWS) {
    __syncthreads();  // the previous step is done with the tiles
    for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += THREADS) {
      const int r = idx / CHUNKS, ch = idx % CHUNKS;
      const bool ok = key0 + r < w.n_b;
      const int64_t tok = w.tok0 + (ok ? key0 + r : 0);
      cp_async_16(kaddr(r, ch), p.kx + tok * p.kx_s + ch * 8, ok);
      if (ch < D_V / 8) cp_async_16(vaddr(r, ch), p.vx + tok * p.vx_s + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    if constexpr (ASYNC_PROXY) fence_proxy_async();
    __syncthreads();
    step(key0);
  }
}

// Pool row of prefix key `key` (request-relative), or -1 past the split's end (a zero-filled row). An index
// outside [0, pool_rows) raises KDT_FLAG_INDEX_OUT_OF_POOL (when `flag`) and reads row 0 instead.
__device__ __forceinline__ int64_t checked_slot(const Params& p, int64_t raw, bool flag) {
  if (raw < 0 || raw >= p.pool_rows) {
    if (flag) atomicOr(p.status, KDT_FLAG_INDEX_OUT_OF_POOL);
    return 0;
  }
  return raw;
}

__device__ __forceinline__ int64_t pool_slot(const Params& p, const Work& w, int key, bool flag) {
  return key < w.kend ? checked_slot(p, p.kv_indices[w.kv0 + key], flag) : -1;
}

// The tree mask of the draft block: may draft node i see draft key j?
struct DraftMask {
  const uint8_t* mask;
  int64_t m0, stride;
  int L, n_b;
};

__device__ __forceinline__ DraftMask draft_mask(const Params& p, const Work& w) {
  return DraftMask{p.mask, p.mask ? p.mask_indptr[blockIdx.z] : 0, (int64_t)w.L + w.n_b, w.L, w.n_b};
}

__device__ __forceinline__ bool draft_visible(const DraftMask& d, int i, int j) {
  if (j >= d.n_b || i >= d.n_b) return false;
  if (d.mask == nullptr) return j <= i;
  return d.mask[d.m0 + (int64_t)i * d.stride + d.L + j] != 0;
}

// One row of a CTA's result: the normalised partial output (this thread's columns col0 + 8 nt + 2 (lane & 3)
// of fragment half h) and, from the `lead` thread, the log2-domain LSE.
template <int NT>
__device__ __forceinline__ void write_partial_row(const Params& p, int64_t prow, float m, float l, float vscale,
                                                  bool lead, int col0, const float (&acc)[NT][4], int h) {
  const float inv = l > 0.f ? vscale / l : 0.f;
  if (lead) p.lse_part[prow] = l > 0.f ? m + log2f(l) : -INFINITY;
  float* dst = p.o_part + prow * D_V + col0 + (threadIdx.x & 3) * 2;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
    *reinterpret_cast<float2*>(dst + nt * 8) = make_float2(acc[nt][2 * h] * inv, acc[nt][2 * h + 1] * inv);
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

// Rows of Q and K stored unpadded (576 bf16 = 1152 B) with their 16-byte chunks XOR-swizzled by (row & 7): ldmatrix
// stays conflict-free without the padding that a 231 KB budget has no room for.
__device__ __forceinline__ int swz(int row, int chunk) { return row * D_QK + ((chunk ^ (row & 7)) << 3); }

// The prefix loop of the 64-key kernels (v3, v4): a STAGES-deep cp.async ring of 64-key tiles of TILE_BYTES each,
// loaded by 8 warps, each 8 tile rows with 8 lanes per row, so that every lane group moves 128 contiguous bytes
// per instruction (whole L2 lines, whole 128-byte shared-memory rows). This thread loads 16-byte chunks lch + 8k
// (k < 9) of rows lrow and lrow + 4 to row_off(row, lch) + k * GROUP_STRIDE. The kv_indices of the tile after
// next are loaded during the current step and checked only when used, so no compare waits on the load.
// ASYNC_PROXY: fence the cp.async writes for wgmma's async proxy before the barrier. step(kt, key0) consumes the
// tile at shared address kt whose first key is key0.
template <int STAGES, int BNK, int TILE_BYTES, int GROUP_STRIDE, bool ASYNC_PROXY, typename RowOff, typename Step>
__device__ __forceinline__ void prefix_pipeline(const Params& p, const Work& w, uint32_t ring, RowOff row_off,
                                                Step step) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int lch = lane & 7, lrow = warp * 8 + (lane >> 3);
  const int ntiles = (w.kend - w.kbeg + BNK - 1) / BNK;
  const uint32_t dst[2] = {row_off(lrow, lch), row_off(lrow + 4, lch)};
  auto fetch = [&](int t, int i) -> int64_t {  // raw kv_indices entry (0 past the split) of row lrow + 4i of tile t
    const int key = w.kbeg + t * BNK + lrow + 4 * i;
    return key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
  };
  auto load_tile = [&](int t, const int64_t (&raw)[2]) {
    const uint32_t d = ring + (t % STAGES) * TILE_BYTES;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const bool ok = w.kbeg + t * BNK + lrow + 4 * i < w.kend;
      const int64_t slot = ok ? checked_slot(p, raw[i], lch == 0) : 0;
      const char* src = reinterpret_cast<const char*>(p.kb + slot * p.kb_s) + lch * 16;
#pragma unroll
      for (int k = 0; k < CHUNKS / 8; ++k) cp_async_16s(d + dst[i] + k * GROUP_STRIDE, src + k * 128, ok ? 16 : 0);
    }
  };
#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) {
    if (t < ntiles) {
      const int64_t raw[2] = {fetch(t, 0), fetch(t, 1)};
      load_tile(t, raw);
    }
    cp_async_commit();  // group t (Q rides in group 0)
  }
  int64_t pending[2] = {fetch(STAGES - 1, 0), fetch(STAGES - 1, 1)};  // the next tile to load
  for (int t = 0; t < ntiles; ++t) {
    cp_async_wait<STAGES - 2>();
    if constexpr (ASYNC_PROXY) fence_proxy_async();
    __syncthreads();
    if (t + STAGES - 1 < ntiles) load_tile(t + STAGES - 1, pending);
    cp_async_commit();
    pending[0] = fetch(t + STAGES, 0);  // consumed one step later: the index load overlaps this step
    pending[1] = fetch(t + STAGES, 1);
    step(ring + (t % STAGES) * TILE_BYTES, w.kbeg + t * BNK);
  }
}

// ---------------------------------------------------------------------------------------------------------------
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


__device__ __forceinline__ void bar_named(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// A row keeps its reference max until a new maximum exceeds it by more than this (log2 units): the rescale of
// 128 accumulators then runs only when some row of the warp needs it, while P <= 2^8 stays exact enough in bf16
// and the fp32 sums cannot overflow.
constexpr float RESCALE_SLACK = 8.f;

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
  if (__any_sync(0xffffffffu, bump_any)) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        st.acc[m][nt][0] *= alpha[m][0];
        st.acc[m][nt][1] *= alpha[m][0];
        st.acc[m][nt][2] *= alpha[m][1];
        st.acc[m][nt][3] *= alpha[m][1];
      }
  }
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

}  // namespace

#include "kdtree_verify_sm90.cuh"  // v4: the sm_90a wgmma kernel

namespace {

// Merge the nsplit + 1 partials of row r = i*H + h of request b and write bf16 o. One CTA of 4 warps per
// (row, 128-column quarter): every warp finds the largest LSE and the weight sum over all splits (lanes stride
// the splits), warp w accumulates splits w, w + 4, ... for its lane's 4 columns, and the four sums meet in
// shared memory. An empty split (LSE -inf) is skipped, never read.
__global__ void __launch_bounds__(128) verify_reduce_kernel(Params p) {
  const int r = blockIdx.x >> 2, quarter = blockIdx.x & 3, b = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t tok0 = load_qo(p, b);
  const int n_b = max(0, min((int)(load_qo(p, b + 1) - tok0), p.N));
  if (r >= n_b * p.H) return;
  const int S = p.nsplit + 1;
  const int64_t part0 = (int64_t)b * S * p.R + r;
  const float* lse = p.lse_part + part0;
  float m = -INFINITY;
  for (int s = lane; s < S; s += 32) m = fmaxf(m, lse[(int64_t)s * p.R]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float wsum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const int col = quarter * 128 + lane * 4;
  if (m != -INFINITY) {
    for (int s = lane; s < S; s += 32) wsum += exp2f(lse[(int64_t)s * p.R] - m);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) wsum += __shfl_xor_sync(0xffffffffu, wsum, o);
#pragma unroll 4
    for (int s = warp; s < S; s += 4) {
      const float x = lse[(int64_t)s * p.R];
      if (x == -INFINITY) continue;
      const float wt = exp2f(x - m);
      const float4 v = *reinterpret_cast<const float4*>(p.o_part + (part0 + (int64_t)s * p.R) * D_V + col);
      acc.x += wt * v.x; acc.y += wt * v.y; acc.z += wt * v.z; acc.w += wt * v.w;
    }
  }
  __shared__ float4 sums[4][32];
  sums[warp][lane] = acc;
  __syncthreads();
  if (warp != 0) return;
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  const float4 a = sums[0][lane], b1 = sums[1][lane], c2 = sums[2][lane], d3 = sums[3][lane];
  const int i = r / p.H, h = r % p.H;
  __nv_bfloat16* dst = p.o + (tok0 + i) * p.o_st + (int64_t)h * p.o_sh + col;
  dst[0] = __float2bfloat16((a.x + b1.x + c2.x + d3.x) * inv);
  dst[1] = __float2bfloat16((a.y + b1.y + c2.y + d3.y) * inv);
  dst[2] = __float2bfloat16((a.z + b1.z + c2.z + d3.z) * inv);
  dst[3] = __float2bfloat16((a.w + b1.w + c2.w + d3.w) * inv);
}

struct ConfigEntry {
  kdt_config cfg;
  const char* name;
  void (*kernel)(Params);
};

template <int BM, int STAGES>
constexpr ConfigEntry make_entry() {
  return ConfigEntry{{BM, STAGES, Cfg<BM, STAGES>::THREADS, Cfg<BM, STAGES>::SMEM, BN},
                     BM == 64 ? "verify_split_kernel<64,3>" : "verify_split_kernel<32,2>",
                     &verify_split_kernel<BM, STAGES>};
}

template <int STAGES>
constexpr ConfigEntry make_wgmma_entry() {
  return ConfigEntry{{Cfg4<STAGES>::BM, STAGES, Cfg4<STAGES>::THREADS, Cfg4<STAGES>::SMEM, BN4},
                     "verify_wgmma_kernel<64,2>", &verify_wgmma_kernel<Cfg4<STAGES>::BM, STAGES>};
}

template <int STAGES>
constexpr ConfigEntry make_rows32_entry() {
  return ConfigEntry{{Cfg3<STAGES>::BM, STAGES, Cfg3<STAGES>::THREADS, Cfg3<STAGES>::SMEM, BN3},
                     "verify_rows32_kernel<64,2>", &verify_rows32_kernel<Cfg3<STAGES>::BM, STAGES>};
}

// Automatic selection (kdtree_verify_select_config): on compute capability 9.x, when the library holds sm_90a code
// (KDT_SM90A_BUILT, set by the build when sm_90a is among its archs) and the device's opt-in shared memory per
// block fits it, the wgmma kernel (v4); otherwise the first of the first kNumAutoConfigs portable mma.sync entries
// that fits: v3 (rows32) on Hopper-sized shared memory (227 KB), the narrow kernel on sm_120's 99 KB.
// kdtree_verify_force_config picks any entry (benchmarks time the sm_120 configuration on a Hopper GPU that way).
const ConfigEntry kConfigs[] = {make_rows32_entry<2>(), make_entry<64, 3>(), make_entry<32, 2>(),
                                make_wgmma_entry<2>()};
constexpr int kNumAutoConfigs = 3;
constexpr int kWgmmaConfig = 3;  // needs compute capability 9.x (sm_90a)
#ifdef KDT_SM90A_BUILT
constexpr bool kHasSm90a = true;
#else
constexpr bool kHasSm90a = false;
#endif
constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

constexpr int kMaxDevices = 64;
int g_config_of_device[kMaxDevices];      // 0 = unknown, else index + 1
int g_cc_of_device[kMaxDevices];          // its compute capability, major * 10 + minor (set with the above)
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

const char* kdtree_verify_config_name(int index) {
  return index >= 0 && index < kNumConfigs ? kConfigs[index].name : nullptr;
}

int kdtree_verify_select_config(int smem_optin_bytes, int compute_capability) {
  if (kHasSm90a && compute_capability >= 90 && compute_capability < 100 &&
      kConfigs[kWgmmaConfig].cfg.dynamic_smem <= smem_optin_bytes)
    return kWgmmaConfig;
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
  int optin = 0, cc_major = 0, cc_minor = 0;
  if (g_config_of_device[dev] == 0) {
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
      return KDT_ERR_DEVICE;
    g_cc_of_device[dev] = cc_major * 10 + cc_minor;
    const int auto_idx = kdtree_verify_select_config(optin, g_cc_of_device[dev]);
    if (auto_idx < 0) return KDT_ERR_DEVICE;
    g_config_of_device[dev] = auto_idx + 1;
  }
  const int idx = g_forced_config >= 0 ? g_forced_config : g_config_of_device[dev] - 1;
  // wgmma exists on sm_90a only; elsewhere the kernel body is a trap (reachable here only when forced)
  if (idx == kWgmmaConfig && g_cc_of_device[dev] / 10 != 9) return KDT_ERR_DEVICE;
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
  verify_reduce_kernel<<<dim3(p.R * 4, bs), 128, 0, s>>>(p);
  if (cudaGetLastError() != cudaSuccess) return KDT_ERR_LAUNCH;
  return KDT_OK;
}

}  // extern "C"
