// kdtree-lab: how fast one SM stores a CTA's partial rows, by store pattern (issue 52, the fixed cost).
//
// A split CTA's epilogue writes its 64 rows x 512 columns of fp32 partial output (128 KB); the phase clocks put that at
// 2.4 us alone and 4 us when every SM does it at once (~30 bytes a cycle a SM). Whether the bytes or the pattern hold
// it decides the next change: fewer bytes (bf16 partials) or whole lines per store instruction (a transpose first).
// Each CTA of 256 threads (8 warps, as the 64-row forms' PV warps; warp w owns columns 64 w .. 64 w + 63 of all 64
// rows) writes its block `reps` times in one of these patterns (the same addresses each rep, which L2 holds, as the
// combine's reads find them):
//   mma_f2    the bf16 role split's (frame.cuh write_partial_row): per m16n8 fragment a float2, rows g and g + 8 of
//             each 16-row m-tile, columns 8 nt + 2 t4: a warp store is 8 rows x 32 B
//   e4m3_f4   the e4m3 forms' (e4m3_rows.cuh): a float4 of columns 16 cc + 4 t4: 8 rows x 64 B
//   rows_f4   the warp's 64 columns of two rows a store: 2 rows x 256 B
//   line_f4   whole 512-B stretches of one row: the 8 warps take rows in turn (the same bytes, another owner)
//   e4m3_b16  e4m3_f4's places with bf16 values (8 B a lane): 8 rows x 32 B, half the bytes
// Prints one JSON object: per pattern and grid (every SM, one CTA), the median time of a launch at `reps` and at 1
// (CUDA events over `launches` launches), the time a rep takes, bytes a cycle a SM at the clock the device reports
// (cudaDevAttrClockRate, its boost clock: under load the SMs may run slower, so a lower bound on bytes a cycle).
//   nvcc -O3 -std=c++17 -arch=sm_90a -o store_patterns scripts/store_patterns.cu && ./store_patterns
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int ROWS = 64, COLS = 512, THREADS = 256;
constexpr int BLOCK = ROWS * COLS;  // floats a CTA writes

enum Pattern { MMA_F2, E4M3_F4, ROWS_F4, LINE_F4, E4M3_B16, PATTERNS };
const char* const NAMES[PATTERNS] = {"mma_f2", "e4m3_f4", "rows_f4", "line_f4", "e4m3_b16"};

// Stores through asm volatile: plain C++ stores of the same addresses each rep are dead but the last, and nvcc drops
// them (and splits some into 4-byte stores) once it unrolls the reps.
__device__ __forceinline__ void st2(float* p, float a, float b) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ void st4(float* p, float a, float b, float c, float d) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
__device__ __forceinline__ void st2u(void* p, unsigned a, unsigned b) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}

// The places an MMA epilogue stores a thread's fragments at, in warp w's 64 columns of the 64 rows: rows g and g + 8 of
// each 16-row m-tile, STEPS stretches STEP columns apart, each WIDTH columns from t4's; f(element index) for each.
// mma_f2 (the role split's float2s: STEPS 8, STEP 8, WIDTH 2) and e4m3_f4 / e4m3_b16 (the e4m3 forms': 4, 16, 4).
template <int STEPS, int STEP, int WIDTH, typename F>
__device__ __forceinline__ void fragment_places(int w, int lane, F&& f) {
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int k = 0; k < STEPS; ++k) f((16 * m + 8 * h + g) * COLS + 64 * w + STEP * k + WIDTH * t4);
}

template <int P>
__global__ void __launch_bounds__(THREADS, 1) store_kernel(float* out, int reps, float v) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  float* blk = out + (size_t)blockIdx.x * BLOCK;
  for (int r = 0; r < reps; ++r) {
    const float x = v + r;  // a value the compiler cannot hoist out of the loop
    if constexpr (P == MMA_F2) {
      fragment_places<8, 8, 2>(w, lane, [&](int i) { st2(blk + i, x, x + 1.f); });
    } else if constexpr (P == E4M3_F4) {
      fragment_places<4, 16, 4>(w, lane, [&](int i) { st4(blk + i, x, x + 1.f, x + 2.f, x + 3.f); });
    } else if constexpr (P == ROWS_F4) {
#pragma unroll
      for (int i = 0; i < ROWS / 2; ++i)
        st4(blk + (2 * i + (lane >> 4)) * COLS + 64 * w + 4 * (lane & 15), x, x + 1.f, x + 2.f, x + 3.f);
    } else if constexpr (P == LINE_F4) {
#pragma unroll
      for (int i = 0; i < ROWS / 2; ++i) {  // 32 stores a warp: 256 stretches of 128 floats, warp w takes w, w + 8, ..
        const int s = w + 8 * i, row = s >> 2, col = 128 * (s & 3) + 4 * lane;
        st4(blk + row * COLS + col, x, x + 1.f, x + 2.f, x + 3.f);
      }
    } else {  // E4M3_B16: four bf16 (8 bytes) where E4M3_F4 puts four floats, in a bf16 block of the same rows
      unsigned short* b16 = reinterpret_cast<unsigned short*>(blk);
      const unsigned bits = __float_as_uint(x) >> 16, two = bits | (bits << 16);
      fragment_places<4, 16, 4>(w, lane, [&](int i) { st2u(b16 + i, two, two); });
    }
  }
}

using Kernel = void (*)(float*, int, float);
const Kernel KERNELS[PATTERNS] = {store_kernel<MMA_F2>, store_kernel<E4M3_F4>, store_kernel<ROWS_F4>,
                                  store_kernel<LINE_F4>, store_kernel<E4M3_B16>};
const int BYTES[PATTERNS] = {BLOCK * 4, BLOCK * 4, BLOCK * 4, BLOCK * 4, BLOCK * 2};

bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "store_patterns: %s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

// Median of `launches` timed launches (ms) of `k` on `ctas` CTAs at `reps`.
float time_ms(Kernel k, float* out, int ctas, int reps, int launches) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < launches + 3; ++i) {
    cudaEventRecord(a);
    k<<<ctas, THREADS>>>(out, reps, 1.f + i);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0.f;
    cudaEventElapsedTime(&t, a, b);
    if (i >= 3) ms.push_back(t);  // three warm-up launches
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 65, launches = argc > 2 ? std::atoi(argv[2]) : 25;
  if (reps < 2 || launches < 1) {
    std::fprintf(stderr, "store_patterns: expected REPS >= 2 and LAUNCHES >= 1, found %d and %d\n", reps, launches);
    return 2;
  }
  cudaDeviceProp prop;
  if (!check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const int sms = prop.multiProcessorCount;
  float* out = nullptr;
  if (!check(cudaMalloc(&out, (size_t)sms * BLOCK * sizeof(float)), "cudaMalloc")) return 1;
  std::printf("{\"gpu\": \"%s\", \"sms\": %d, \"sm_clock_khz\": %d, \"reps\": %d, \"launches\": %d, \"rows\": [",
              prop.name, sms, clock_khz, reps, launches);
  bool first = true;
  for (int pat = 0; pat < PATTERNS; ++pat)
    for (int ctas : {sms, 1}) {
      const float t1 = time_ms(KERNELS[pat], out, ctas, 1, launches);
      const float tn = time_ms(KERNELS[pat], out, ctas, reps, launches);
      if (!check(cudaGetLastError(), NAMES[pat])) return 1;
      const double rep_us = (tn - t1) * 1e3 / (reps - 1);
      const double per_clk = BYTES[pat] / (rep_us * 1e-6) / (clock_khz * 1e3);  // bytes a cycle a SM
      std::printf("%s{\"pattern\": \"%s\", \"ctas\": %d, \"bytes_per_cta\": %d, \"launch_1_ms\": %.5f, "
                  "\"launch_reps_ms\": %.5f, \"rep_us\": %.4f, \"bytes_per_clk_per_sm\": %.2f}",
                  first ? "" : ", ", NAMES[pat], ctas, BYTES[pat], t1, tn, rep_us, per_clk);
      first = false;
    }
  std::printf("]}\n");
  cudaFree(out);
  return 0;
}
