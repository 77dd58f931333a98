// The combine kernel: merges the nsplit + 1 partial results of each row by their log-sum-exps into bf16 o.
#pragma once
#include "../common/frame.cuh"

namespace kdt {

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

}  // namespace kdt
