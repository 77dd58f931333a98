// The combine kernel: merges the nsplit + 1 partial results of each row by their log-sum-exps into bf16 o.
#pragma once
#include "../common/frame.cuh"

namespace kdt {

// Warps that merge one (row, 128-column quarter) for S = nsplit + 1 partials: few splits need one warp, many
// spread over up to four so that no warp walks more than ~16 of them. A function of nsplit only, so a captured
// graph keeps its launch shape.
constexpr int reduce_warps(int splits) { return splits <= 8 ? 1 : (splits <= 32 ? 2 : 4); }

// One split's LSE x (split s of S) into the running maximum m and `last`, the last prefix split with a finite LSE.
__device__ __forceinline__ void see_lse(float& m, int& last, int s, int S, float x) {
  m = fmaxf(m, x);
  if (s < S - 1 && x != -INFINITY) last = s;
}

// Merge the S partials of row r = i*H + h of request b and write bf16 o. A CTA of 4 warps holds 4 / W (row,
// quarter) units of W warps each; warp wi of a unit takes splits wi, wi + W, ... . Every warp reads all the LSEs
// for the maximum and the weight sum (L1 hits after the first pass); then, 32 splits at a time, each lane holds
// one split's weight, broadcasts it, and the warp loads that split's 4 x 32 columns: the loads do not wait on the
// weights (an empty split's partial row, never written, is loaded and its value discarded by a select, never
// multiplied), so eight are in flight per warp. W > 1: the unit's warps meet in shared memory. With programmatic
// dependent launch the CTA starts while the split kernel finishes and waits (griddepcontrol.wait) before reading.
// Only the prefix splits up to the last one with a finite LSE are loaded (the non-empty splits of a prefix are
// splits 0, 1, ...; one past them has weight 0 anyway), then the draft block's partial: a short prefix under a
// split count captured for a long one reads its few partials, not nsplit of them.
template <int W>
__global__ void __launch_bounds__(128, 1) verify_reduce_kernel(Params p) {
  constexpr int UNITS = 4 / W;
  phase_mark(1, PH_ENTRY);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int unit = warp / W, wi = warp % W;
  const int u = blockIdx.x * UNITS + unit;
  const int r = u >> 2, quarter = u & 3, b = blockIdx.y;
  const int64_t tok0 = load_qo(p, b);
  const int n_b = max(0, min((int)(load_qo(p, b + 1) - tok0), p.N));
  const bool valid = r < n_b * p.H;  // uniform over a unit's warps
  phase_mark(1, PH_WORK);
  pdl_wait();
  phase_mark(1, PH_PROLOGUE);
  const int S = p.nsplit + 1;
  const int64_t part0 = (int64_t)b * S * p.R + r;
  const int col = quarter * 128 + lane * 4;
  float wsum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (valid) {
    const float* lse = p.lse_part + part0;
    // the LSEs of splits lane + 32 i (i < HELD) in flight at once and kept for the weight sum (one round trip for
    // S <= 32 HELD; a loop over the rest); values and order as one loop over s = lane, lane + 32, ...
    constexpr int HELD = 5;
    float held[HELD];
#pragma unroll
    for (int i = 0; i < HELD; ++i) held[i] = lane + 32 * i < S ? lse[(int64_t)(lane + 32 * i) * p.R] : -INFINITY;
    float m = -INFINITY;
    int last = -1;  // the last prefix split with a finite LSE
#pragma unroll
    for (int i = 0; i < HELD; ++i) see_lse(m, last, lane + 32 * i, S, held[i]);
    for (int s = lane + 32 * HELD; s < S; s += 32) see_lse(m, last, s, S, lse[(int64_t)s * p.R]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
    }
    if (m != -INFINITY) {
#pragma unroll
      for (int i = 0; i < HELD; ++i)
        if (lane + 32 * i < S) wsum += exp2f(held[i] - m);
      for (int s = lane + 32 * HELD; s < S; s += 32) wsum += exp2f(lse[(int64_t)s * p.R] - m);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) wsum += __shfl_xor_sync(0xffffffffu, wsum, o);
      const float* part = p.o_part + part0 * D_V + col;
      const int used = last + 1;  // prefix splits read; the draft block's partial (split S - 1) follows
      if (wi == 0) {
        const float wd = exp2f(lse[(int64_t)(S - 1) * p.R] - m);
        if (wd > 0.f) {
          const float4 v = *reinterpret_cast<const float4*>(part + (int64_t)(S - 1) * p.R * D_V);
          acc.x += wd * v.x; acc.y += wd * v.y; acc.z += wd * v.z; acc.w += wd * v.w;
        }
      }
      for (int k0 = 0; wi + W * k0 < used; k0 += 32) {
        const int mine = wi + W * (k0 + lane);  // the split whose weight this lane holds
        const float wt_mine = mine < used ? exp2f(lse[(int64_t)mine * p.R] - m) : 0.f;  // 0 for an empty split
        const int count = min(32, (used - wi + W - 1) / W - k0);
        const float* src = part + (int64_t)(wi + W * k0) * p.R * D_V;
        const int64_t stride = (int64_t)W * p.R * D_V;
        for (int k8 = 0; k8 < count; k8 += 8) {
          float4 v[8];
          float wt[8];
#pragma unroll
          for (int k = 0; k < 8; ++k) {  // eight independent loads (a row past the warp's last repeats that row)
            wt[k] = __shfl_sync(0xffffffffu, wt_mine, (k8 + k) & 31);
            if (k8 + k >= count) wt[k] = 0.f;
            v[k] = *reinterpret_cast<const float4*>(src + min(k8 + k, count - 1) * stride);
          }
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            acc.x += wt[k] > 0.f ? wt[k] * v[k].x : 0.f;
            acc.y += wt[k] > 0.f ? wt[k] * v[k].y : 0.f;
            acc.z += wt[k] > 0.f ? wt[k] * v[k].z : 0.f;
            acc.w += wt[k] > 0.f ? wt[k] * v[k].w : 0.f;
          }
        }
      }
    }
  }
  phase_mark(1, PH_LOOP);
  if constexpr (W > 1) {
    __shared__ float4 sums[4][32];
    sums[warp][lane] = acc;
    __syncthreads();
    if (wi != 0) return;
#pragma unroll
    for (int j = 1; j < W; ++j) {
      const float4 x = sums[warp + j][lane];
      acc.x += x.x; acc.y += x.y; acc.z += x.z; acc.w += x.w;
    }
  }
  if (!valid) return;
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  const int i = r / p.H, h = r % p.H;
  __nv_bfloat16* dst = p.o + (tok0 + i) * p.o_st + (int64_t)h * p.o_sh + col;
  const uint32_t lo = pack_bf16(acc.x * inv, acc.y * inv), hi = pack_bf16(acc.z * inv, acc.w * inv);
  if ((reinterpret_cast<uintptr_t>(dst) & 7) == 0) {  // o's strides are free: 8-byte stores where they align
    *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);
  } else {
    dst[0] = __ushort_as_bfloat16((unsigned short)(lo & 0xffffu));
    dst[1] = __ushort_as_bfloat16((unsigned short)(lo >> 16));
    dst[2] = __ushort_as_bfloat16((unsigned short)(hi & 0xffffu));
    dst[3] = __ushort_as_bfloat16((unsigned short)(hi >> 16));
  }
  phase_mark(1, PH_DONE);
}

}  // namespace kdt
