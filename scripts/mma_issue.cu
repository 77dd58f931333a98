// kdtree-lab: how often one warp issues mma.sync, by warps per scheduler and independent accumulator chains (issue
// 52, what bounds the sm_120 forms on the H200).
//
// The 64-row e4m3 form's QK warp (one per scheduler) issues its 144 MMAs a 32-key tile ~15 cycles apart on the H200
// (data/results/h200/2026-12-06-ncu-e4m3/): the tile takes what its MMAs take one after another. Whether that spacing
// is one warp's (then a second MMA warp per scheduler doubles the rate) or the tensor pipe's, and whether ALU work
// between the MMAs of one warp is free, decides what the next change on the H200 can buy. Each CTA has 4 W warps
// (W per scheduler, one CTA per SM); each warp runs CHAINS independent accumulator chains of the instruction on
// register operands, with FILL independent FFMAs beside each MMA (in FILL chains of their own); each warp times its
// loop with clock64. Kinds: f16 m16n8k16 (what the timing library issues for one e4m3 m16n8k32) and bf16 m16n8k16 (the
// bf16 forms').
// Prints one JSON object: per (kind, W, CHAINS, FILL) the median over warps of the cycles a warp takes per MMA of its
// own and the MMAs a scheduler issues per 100 cycles (W warps together).
//   nvcc -O3 -std=c++17 -arch=sm_90a -o mma_issue scripts/mma_issue.cu && ./mma_issue
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int ITERS = 4096;

__device__ __forceinline__ void mma(int kind, float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if (kind == 0)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int KIND, int CHAINS, int FILL>
__global__ void issue_kernel(int iters, long long* cycles, float* sink) {
  const uint32_t one = KIND == 0 ? 0x3c003c00u : 0x3f803f80u;  // pairs near 1.0
  uint32_t a[4], b[CHAINS][2];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = one ^ ((threadIdx.x << i) & 0x00030003u);
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) {
    b[c][0] = one ^ ((threadIdx.x + c) & 0x00030003u);
    b[c][1] = one ^ ((threadIdx.x * 3u + (c << 16)) & 0x00030003u);
  }
  float d[CHAINS][4] = {};
  float f[FILL > 0 ? FILL : 1];
#pragma unroll
  for (int k = 0; k < (FILL > 0 ? FILL : 1); ++k) f[k] = 0.001f * (threadIdx.x + k);
  __syncwarp();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    asm volatile("" : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3]));
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
      asm volatile("" : "+r"(b[c][0]), "+r"(b[c][1]));
      mma(KIND, d[c], a, b[c][0], b[c][1]);
#pragma unroll
      for (int k = 0; k < FILL; ++k) f[k] = fmaf(f[k], 0.999f, 0.5f);  // independent of the MMAs
    }
  }
  __syncwarp();
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
#pragma unroll
  for (int k = 0; k < FILL; ++k) s += f[k];
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) {
    cycles[warp] = t1 - t0;
    sink[warp] = s;
  }
}

struct Variant {
  int kind, chains, fill;
  void (*fn)(int, long long*, float*);
};

#define V(K, C, F) Variant{K, C, F, issue_kernel<K, C, F>}
const Variant VARIANTS[] = {V(0, 4, 0), V(0, 8, 0), V(0, 4, 4), V(0, 8, 4), V(0, 4, 8),
                            V(1, 4, 0), V(1, 8, 0), V(1, 4, 4), V(1, 8, 4), V(1, 4, 8)};
#undef V
const char* const KINDS[] = {"f16", "bf16"};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "mma_issue: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : ITERS;
  if (iters < 16) {
    std::fprintf(stderr, "mma_issue: expected at least 16 iterations, found %d\n", iters);
    return 2;
  }
  int dev = 0, sms = 0, clock_khz = 0;
  check(cudaGetDevice(&dev), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev), "clock");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, dev), "properties");
  const int max_warps = sms * 4 * 4;
  long long* cycles = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&cycles, max_warps * sizeof(long long)), "cycles");
  check(cudaMalloc(&sink, max_warps * sizeof(float)), "sink");
  std::printf("{\"gpu\": \"%s\", \"sms\": %d, \"sm_clock_khz\": %d, \"iters\": %d, \"rows\": [", prop.name, sms,
              clock_khz, iters);
  bool first = true;
  for (const Variant& v : VARIANTS)
    for (int w : {1, 2, 4}) {
      const int threads = 128 * w, warps = sms * 4 * w;
      v.fn<<<sms, threads>>>(iters / 8, cycles, sink);  // warm-up
      check(cudaGetLastError(), "launch");
      v.fn<<<sms, threads>>>(iters, cycles, sink);
      check(cudaDeviceSynchronize(), "run");
      std::vector<long long> c(warps);
      check(cudaMemcpy(c.data(), cycles, warps * sizeof(long long), cudaMemcpyDeviceToHost), "copy");
      std::sort(c.begin(), c.end());
      const double per_mma = static_cast<double>(c[warps / 2]) / (static_cast<double>(iters) * v.chains);
      std::printf("%s\n {\"kind\": \"%s\", \"warps_per_scheduler\": %d, \"chains\": %d, \"fill\": %d, "
                  "\"warp_cycles_per_mma\": %.3f, \"mmas_per_100_cycles_per_scheduler\": %.2f, "
                  "\"warp_cycles_min\": %lld, \"warp_cycles_max\": %lld}",
                  first ? "" : ",", KINDS[v.kind], w, v.chains, v.fill, per_mma, 100.0 * w / per_mma, c.front(),
                  c.back());
      first = false;
    }
  std::printf("\n]}\n");
  check(cudaFree(cycles), "free");
  check(cudaFree(sink), "free");
  return 0;
}
