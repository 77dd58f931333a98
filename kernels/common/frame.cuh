// The frame every verify kernel shares: MLA constants, the launch parameters (Params), where a CTA works
// (Work, setup_work), the Q tile load, the prefix and draft-block load pipelines, the tree mask and the partial-row
// epilogue. A CTA covers request b's rows [row0, row0 + BM) (row = draft node x heads + head) against one prefix
// split (its range computed on the device from kv_indptr) or the draft block (split == nsplit), and writes fp32
// partial outputs and log2-domain LSEs that the combine kernel (combine/verify_reduce.cuh) merges.
#pragma once
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "../kdtree_verify.h"
#include "layout.cuh"
#include "phase.cuh"
#include "ptx.cuh"

namespace kdt {

constexpr int D_QK = 576;
constexpr int D_V = 512;
constexpr int CHUNKS = D_QK / 8;      // 16-byte chunks per 576-wide row
constexpr int MIN_SPLIT_TOKENS = 64;  // a prefix split covers at least this many tokens
constexpr int HEADER_BYTES = 256;     // workspace header (status word), kdtree_verify_workspace_bytes
// The e4m3 forms' Q pass (mma_sync/e4m3_q_pass.cuh) keeps each request's rows, padded to Q8_ROWS_ALIGN (a multiple of
// both forms' row tiles, so every m-tile a CTA loads exists), as two e4m3 terms (Q8_TERM_BYTES each) and an fp32 logit
// scale in the workspace after the LSEs
constexpr int Q8_ROWS_ALIGN = 64;
constexpr int Q8_TERM_BYTES = D_QK;  // one e4m3 byte per dim
constexpr int MAX_NSPLIT = 512;
constexpr float LOG2E = 1.4426950408889634f;

// A row keeps its reference max until a new maximum exceeds it by more than this (log2 units): the rescale of
// the accumulators then runs only when some row needs it, while P <= 2^8 stays exact enough in bf16 and the fp32
// sums cannot overflow.
constexpr float RESCALE_SLACK = 8.f;

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
  uint8_t* q8; float* q8_scale;  // the e4m3 forms' Q terms and row scales (their Q pass's; in the workspace)
  int draft_first;  // 1: the draft block is blockIdx.y 0 (dispatched first); 0: blockIdx.y nsplit (last): setup_work
};

// (gr / H, gr % H) for a row gr of draft node x head, 0 <= gr < 2^21 (the launch caps N x H at 2^20; a CTA's tile
// reaches past it by less than 64) and H >= 1: its node and head, without the integer division's ~25 instructions
// and the branch ptxas puts around them. gr and H are exact in fp32 and the quotient through MUFU.RCP is off by less
// than one (its relative error is below 2^-21 and gr / H < 2^20, or H = 1); one step each way corrects it (checked
// for every gr < 2^21 and H <= 1024 with the reciprocal off by up to 2 ulp: data/results/cpu/2026-12-06-q-row-rcp/).
__device__ __forceinline__ int2 node_head(int gr, int H) {
  int t = __float2int_rz(__int2float_rn(gr) * __fdividef(1.f, __int2float_rn(H)));
  int h = gr - t * H;
  if (h >= H) { ++t; h -= H; }
  if (h < 0) { --t; h += H; }
  return make_int2(t, h);
}

__device__ __forceinline__ int64_t load_qo(const Params& p, int i) {
  return p.qo64 ? reinterpret_cast<const int64_t*>(p.qo)[i] : (int64_t)reinterpret_cast<const int32_t*>(p.qo)[i];
}

// Where one CTA works: request b's rows [row0, row0 + BM) against one prefix split or the draft block.
struct Work {
  int64_t tok0, kv0, part0;
  int n_b, rows_b, L, kbeg, kend, row0;
  bool draft;
};

// Fills `w` for CTA (row tile, blockIdx.y, request) = blockIdx; returns false when the CTA has nothing to compute:
// past the request's last row tile, or an empty split (it writes an LSE of -inf, which the reduce ignores).
// Prefix split boundaries are multiples of `gran` tokens and cover at least MIN_SPLIT_TOKENS.
// `tile`: the row tile (a cluster's CTAs that share one pass theirs). With p.draft_first (the launch's grid fits one
// wave) blockIdx.y 0 is the draft block (split nsplit) and y > 0 prefix split y - 1: the draft block, the longest
// CTA of a short call, is dispatched first; without it (more CTAs than slots) y is the split and the draft block
// goes last, so that the CTAs left for a second wave are short draft CTAs, not prefix CTAs waiting for them.
template <int BM, int THREADS>
__device__ __forceinline__ bool setup_work(const Params& p, int gran, Work& w, int tile = blockIdx.x) {
  const int y = blockIdx.y, split = y < p.draft_first ? p.nsplit : y - p.draft_first, b = blockIdx.z,
            tid = threadIdx.x;
  // all four indptr entries first: their loads are in flight together, not two round trips one after the other
  // (the status flag's atomic below would otherwise keep kv_indptr's loads behind qo's compare)
  w.tok0 = load_qo(p, b);
  const int64_t tok1 = load_qo(p, b + 1);
  const int kv_lo = p.kv_indptr[b], kv_hi = p.kv_indptr[b + 1];
  int n_b = (int)(tok1 - w.tok0);
  if (n_b > p.N) {
    if (tid == 0 && tile == 0 && split == 0) atomicOr(p.status, KDT_FLAG_QO_INDPTR);
    n_b = p.N;
  }
  w.n_b = max(n_b, 0);
  w.rows_b = w.n_b * p.H;
  w.row0 = tile * BM;
  if (w.row0 >= p.R) return false;
  w.kv0 = kv_lo;
  w.L = kv_hi - kv_lo;
  if (w.L < 0) {  // a corrupt kv_indptr: flag it (every configuration shares this) and serve an empty prefix
    if (tid == 0 && tile == 0 && split == 0) atomicOr(p.status, KDT_FLAG_KV_INDPTR);
    w.L = 0;
  }
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
  pdl_launch_dependents();  // the epilogue: the combine kernel may launch now (it waits for this grid's writes)
  const float inv = l > 0.f ? vscale / l : 0.f;
  if (lead) p.lse_part[prow] = l > 0.f ? m + log2f(l) : -INFINITY;
  float* dst = p.o_part + prow * D_V + col0 + (threadIdx.x & 3) * 2;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
    *reinterpret_cast<float2*>(dst + nt * 8) = make_float2(acc[nt][2 * h] * inv, acc[nt][2 * h + 1] * inv);
}

// write_partial_row's row in 16-byte stores: lane pairs (t, t ^ 1 of lane & 3) swap one n-tile's pair of values per
// n-tile pair (2 k, 2 k + 1), so that an even lane stores columns 16 k + 2 t .. + 3 (its own two of n-tile 2 k and its
// partner's) and an odd lane 16 k + 8 + 2 (t - 1) .. + 3 (its partner's two of n-tile 2 k + 1 and its own): a warp
// store covers 8 rows x 64 B instead of 8 rows x 32 B, the same values at the same places. Every lane of the warp
// calls it (the swap is a shuffle); `valid` (the same in both lanes of a pair: one row) says whether the row is stored.
template <int NT>
__device__ __forceinline__ void write_partial_row_f4(const Params& p, int64_t prow, bool valid, float m, float l,
                                                     float vscale, bool lead, int col0, const float (&acc)[NT][4],
                                                     int h) {
  static_assert(NT % 2 == 0, "write_partial_row_f4 pairs n-tiles");
  pdl_launch_dependents();  // the epilogue: the combine kernel may launch now (it waits for this grid's writes)
  const float inv = l > 0.f ? vscale / l : 0.f;
  if (valid && lead) p.lse_part[prow] = l > 0.f ? m + log2f(l) : -INFINITY;
  const int t = threadIdx.x & 3;
  const bool odd = t & 1;
  float* dst = p.o_part + prow * D_V + col0 + 2 * (t & 2) + 8 * odd;
#pragma unroll
  for (int k = 0; k < NT / 2; ++k) {
    const float e0 = acc[2 * k][2 * h], e1 = acc[2 * k][2 * h + 1];  // selects, not a register array's index
    const float o0 = acc[2 * k + 1][2 * h], o1 = acc[2 * k + 1][2 * h + 1];
    const float r0 = __shfl_xor_sync(0xffffffffu, odd ? e0 : o0, 1);  // the partner's two of the n-tile kept here
    const float r1 = __shfl_xor_sync(0xffffffffu, odd ? e1 : o1, 1);
    const float4 v = odd ? make_float4(r0 * inv, r1 * inv, o0 * inv, o1 * inv)
                         : make_float4(e0 * inv, e1 * inv, r0 * inv, r1 * inv);
    if (valid) *reinterpret_cast<float4*>(dst + 16 * k) = v;
  }
}

// The lazy rescale of the output accumulators: when any lane of the warp has a factor other than 1 (a row's
// reference maximum moved), multiply each m16n8 fragment's rows by theirs: elements 0, 1 lie on row lane / 4 of
// m-tile m (factor alpha[m][0]), elements 2, 3 on row lane / 4 + 8 (alpha[m][1]). Usually skipped.
template <int MT, int NT>
__device__ __forceinline__ void rescale_rows(float (&acc)[MT][NT][4], const float (&alpha)[MT][2], bool mine) {
  if (__any_sync(0xffffffffu, mine)) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        acc[m][nt][0] *= alpha[m][0];
        acc[m][nt][1] *= alpha[m][0];
        acc[m][nt][2] *= alpha[m][1];
        acc[m][nt][3] *= alpha[m][1];
      }
  }
}

// Rows of Q and K stored unpadded (576 bf16 = 1152 B) with their 16-byte chunks XOR-swizzled by (row & 7): ldmatrix
// stays conflict-free without the padding that a 231 KB budget has no room for.
__device__ __forceinline__ int swz(int row, int chunk) { return row * D_QK + ((chunk ^ (row & 7)) << 3); }

// The prefix loop: a STAGES-deep cp.async ring of BNK-key tiles (BNK a multiple of 32) of TILE_BYTES each, loaded
// by 8 warps with 8 lanes per row, so that every lane group moves 128 contiguous bytes per instruction (whole L2
// lines, whole 128-byte shared-memory rows). This thread loads 16-byte chunks lch + 8k (k < 9) of rows lrow + 4i
// (i < BNK / 32) to row_off(row, lch) + k * GROUP_STRIDE. The kv_indices of the tile after next are loaded during
// the current step and checked only when used, so no compare waits on the load. ASYNC_PROXY: fence the cp.async
// writes for wgmma's async proxy before the barrier. step(kt, key0) consumes the tile at shared address kt whose
// first key is key0. first(): run once after tile 0 (and whatever the caller committed before it, e.g. a Q tile
// staged in ring slot 1) has landed and before slot 1 is refilled, followed by a block barrier.
struct NoFirst {
  __device__ __forceinline__ void operator()() const {}
};

template <int STAGES, int BNK, int TILE_BYTES, int GROUP_STRIDE, bool ASYNC_PROXY, typename RowOff, typename Step,
          typename First = NoFirst>
__device__ __forceinline__ void prefix_pipeline(const Params& p, const Work& w, uint32_t ring, RowOff row_off,
                                                Step step, First first = First()) {
  static_assert(BNK % 32 == 0, "8 warps load 32 rows per pass");
  constexpr int RP = BNK / 32;  // rows per thread
  constexpr bool HAS_FIRST = !std::is_same<First, NoFirst>::value;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int lch = lane & 7, lrow = warp * 4 * RP + (lane >> 3);
  const int ntiles = (w.kend - w.kbeg + BNK - 1) / BNK;
  uint32_t dst[RP];
#pragma unroll
  for (int i = 0; i < RP; ++i) dst[i] = row_off(lrow + 4 * i, lch);
  auto fetch = [&](int t, int i) -> int64_t {  // raw kv_indices entry (0 past the split) of row lrow + 4i of tile t
    const int key = w.kbeg + t * BNK + lrow + 4 * i;
    return key < w.kend ? p.kv_indices[w.kv0 + key] : 0;
  };
  auto load_tile = [&](int t, const int64_t (&raw)[RP]) {
    const uint32_t d = ring + (t % STAGES) * TILE_BYTES;
#pragma unroll
    for (int i = 0; i < RP; ++i) {
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
      int64_t raw[RP];
#pragma unroll
      for (int i = 0; i < RP; ++i) raw[i] = fetch(t, i);
      load_tile(t, raw);
    }
    cp_async_commit();  // group t (Q rides in group 0)
  }
  int64_t pending[RP];  // the next tile to load
#pragma unroll
  for (int i = 0; i < RP; ++i) pending[i] = fetch(STAGES - 1, i);
  for (int t = 0; t < ntiles; ++t) {
    cp_async_wait<STAGES - 2>();
    if constexpr (ASYNC_PROXY) fence_proxy_async();
    __syncthreads();
    if constexpr (HAS_FIRST) {
      if (t == 0) {
        first();
        __syncthreads();
      }
    }
    if (t + STAGES - 1 < ntiles) load_tile(t + STAGES - 1, pending);
    cp_async_commit();
#pragma unroll
    for (int i = 0; i < RP; ++i) pending[i] = fetch(t + STAGES, i);  // consumed one step later: overlaps this step
    step(ring + (t % STAGES) * TILE_BYTES, w.kbeg + t * BNK);
  }
}

// One kernel configuration as its header declares it: its launch shape, its kernel's name and entry point, and the
// features it has: the arch its code needs and the KV pools it reads. Each kernel header defines a constexpr
// function that makes its entry from its own template parameters; the launcher's table adds the selection policy.
constexpr int ARCH_MMA_SYNC = 0;  // mma.sync / ldmatrix / cp.async (every arch the library builds)
constexpr int ARCH_SM90A = 90;    // wgmma: compute capability 9.x with sm_90a code only
constexpr unsigned KV_BF16_BIT = 1u << KDT_KV_BF16, KV_FP8_BIT = 1u << KDT_KV_FP8_E4M3;
struct ConfigEntry {
  int block_m, stages, threads, dynamic_smem, block_n;  // the launch shape (kdt_config's first fields)
  const char* name;
  void (*kernel)(Params);
  int arch;            // ARCH_*
  unsigned kv_dtypes;  // KV_*_BIT: the pools the kernel itself reads
  int cluster = 1;     // CTAs per row tile, one cluster (grid x = row tiles x cluster)
  bool q_pass = false; // launched after the e4m3 Q pass (mma_sync/e4m3_q_pass.cuh), as its PDL dependent
};

}  // namespace kdt
