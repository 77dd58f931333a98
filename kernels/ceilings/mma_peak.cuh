// The mma.sync ceilings the benchmark measures beside our kernels (bench.measure_ceilings): the tensor-core
// instructions sm_120 has (the GEMM ceiling uses wgmma on Hopper, which sm_120 lacks), each with fp32 accumulation:
// bf16 and f16 m16n8k16, e4m3 m16n8k32 (twice the FLOPs per instruction). Every warp runs CHAINS independent
// accumulator chains on register operands, so the loop is bound by the tensor cores alone (no memory traffic); one
// value per warp is written so nothing is eliminated.
#pragma once
#include "../common/ptx.cuh"

namespace kdt {

constexpr int MMA_PEAK_THREADS = 256;
constexpr int MMA_PEAK_CHAINS = 8;
// kdtree_verify_mma_ceiling's kind: the instruction, and its FLOPs per warp-level instruction
constexpr int MMA_PEAK_BF16 = 0, MMA_PEAK_F16 = 1, MMA_PEAK_E4M3 = 2;
constexpr int mma_peak_flops(int kind) { return kind == MMA_PEAK_E4M3 ? 2 * 16 * 8 * 32 : 2 * 16 * 8 * 16; }

template <int KIND>
__global__ void __launch_bounds__(MMA_PEAK_THREADS) mma_peak_kernel(int iters, float* sink) {
  uint32_t a[4], b[MMA_PEAK_CHAINS][2];
  // bf16 / f16 pairs near 1.0; e4m3: bytes 0x38 (1.0) with low bits from the thread and the chain (finite values
  // near 1). Each chain has its own B, so no compiler can share one product among chains (ptxas did, for emulated
  // e4m3 chains with one B on sm_90).
  const uint32_t one = KIND == MMA_PEAK_BF16 ? 0x3f803f80u : KIND == MMA_PEAK_F16 ? 0x3c003c00u : 0x38383838u;
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = one ^ ((threadIdx.x << i) & 0x03030303u);
#pragma unroll
  for (int c = 0; c < MMA_PEAK_CHAINS; ++c) {
    b[c][0] = one ^ ((threadIdx.x + c) & 0x03030303u);
    b[c][1] = one ^ ((threadIdx.x * 3u + (c << 8)) & 0x03030303u);
  }
  float d[MMA_PEAK_CHAINS][4] = {};
  for (int it = 0; it < iters; ++it) {
    // the operands look new to the compiler every iteration (no instruction is emitted): where e4m3 mma.sync is
    // emulated (sm_90: each m16n8k32 becomes e4m3 -> f16 conversions and two f16 m16n8k16), the conversions stay
    // in the loop: A's once per iteration for the 8 chains (as a kernel reuses one fragment), each chain's B
    asm volatile("" : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3]));
#pragma unroll
    for (int c = 0; c < MMA_PEAK_CHAINS; ++c) {
      asm volatile("" : "+r"(b[c][0]), "+r"(b[c][1]));
      if constexpr (KIND == MMA_PEAK_BF16)
        mma_bf16(d[c], a, b[c][0], b[c][1]);
      else if constexpr (KIND == MMA_PEAK_F16)
        mma_f16(d[c], a, b[c][0], b[c][1]);
      else
        mma_e4m3(d[c], a, b[c][0], b[c][1]);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < MMA_PEAK_CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  if ((threadIdx.x & 31) == 0) sink[blockIdx.x * (MMA_PEAK_THREADS / 32) + (threadIdx.x >> 5)] = s;
}

}  // namespace kdt
