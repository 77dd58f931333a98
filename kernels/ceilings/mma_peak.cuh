// The mma.sync ceiling the benchmark measures beside our kernels (bench.measure_ceilings): the bf16 m16n8k16 rate
// with fp32 accumulation, the tensor-core instruction that sm_120 has (the GEMM ceiling uses wgmma on Hopper,
// which sm_120 lacks). Every warp runs CHAINS independent accumulator chains on register operands, so the loop is
// bound by the tensor cores alone (no memory traffic); one value per warp is written so nothing is eliminated.
#pragma once
#include "../common/ptx.cuh"

namespace kdt {

constexpr int MMA_PEAK_THREADS = 256;
constexpr int MMA_PEAK_CHAINS = 8;

__global__ void __launch_bounds__(MMA_PEAK_THREADS) mma_peak_kernel(int iters, float* sink) {
  uint32_t a[4], b0 = threadIdx.x, b1 = threadIdx.x * 3u;
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = 0x3f803f80u ^ (threadIdx.x << i);  // bf16 pairs near 1.0
  float d[MMA_PEAK_CHAINS][4] = {};
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int c = 0; c < MMA_PEAK_CHAINS; ++c) mma_bf16(d[c], a, b0, b1);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < MMA_PEAK_CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  if ((threadIdx.x & 31) == 0) sink[blockIdx.x * (MMA_PEAK_THREADS / 32) + (threadIdx.x >> 5)] = s;
}

}  // namespace kdt
