// The sm_90a frame both wgmma kernels use (v4, verify_wgmma.cuh, and v5, verify_wgmma_v5.cuh): the 128-byte
// swizzle atoms and the compile-time check of their layout against the PTX canonical layouts, the shared-memory
// matrix descriptors, the wgmma wrappers (sm_90a only; elsewhere the kernels are traps), v4's 64-key step, the
// draft block (step4 under the tree mask) and the epilogue (row sums of the two warpgroups, the partial rows), which
// both kernels run. Moved here from the kernels' headers with the SASS of every kernel unchanged.
#pragma once
#include "../common/frame.cuh"

namespace kdt {

constexpr int BN4 = 64;
constexpr int ATOM4 = 64 * 128;  // bytes of one 64-row x 64-dim swizzle atom

template <int STAGES>
struct Cfg4 {
  static constexpr int BM = 64, THREADS = 256;
  static constexpr int TILE_BYTES = (D_QK / 64) * ATOM4;  // 72 KB: a 64-row tile of 576 dims
  static constexpr int Q_BYTES = TILE_BYTES;
  static constexpr int K_BYTES = STAGES * TILE_BYTES;
  static constexpr int P_BYTES = ATOM4;  // 64 rows x 64 keys bf16
  static constexpr int R_BYTES = 2 * 64 * 4;
  static constexpr int SMEM = Q_BYTES + K_BYTES + P_BYTES + R_BYTES + 1024;  // + slack to align atoms to 1 KB
  static_assert(SMEM <= (1 << 18), "desc_advance needs every shared address below 256 KB");
};

// Byte offset of 16-byte chunk `chunk` (0..71) of row `row` (0..63) in a swizzled 64-row tile.
__host__ __device__ constexpr uint32_t atom_off(int row, int chunk) {
  return (chunk >> 3) * ATOM4 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}

// Compile-time check of the writers against the PTX ISA's canonical wgmma layouts ("Shared Memory Matrix Layout",
// 128-byte swizzle = Swizzle<3,4,3>: address bits 4-6 XOR bits 7-9), for the descriptors step4 builds.
__host__ __device__ constexpr uint32_t sw128(uint32_t byte) { return byte ^ (((byte >> 7) & 7) << 4); }
// K-major ((8,m),(T,2k)):((8T,SBO),(1,T)), T = 8 bf16: element (row, k) of the operand that starts at `start`.
constexpr uint32_t kmajor_addr(uint32_t start, uint32_t sbo, int row, int k) {
  return sw128(start + (row % 8) * 128 + (row / 8) * sbo + (k % 8) * 2 + (k / 8) * 16);
}
// MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): element (n, k) of the operand that starts at `start`.
constexpr uint32_t mnmajor_addr(uint32_t start, uint32_t lbo, uint32_t sbo, int n, int k) {
  return sw128(start + (n % 8) * 2 + ((n / 8) % 8) * 16 + (n / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo);
}
// Where the cp.async / st.shared writers put element (row, col) of a 64-row tile.
__host__ __device__ constexpr uint32_t tile_addr(int row, int col) { return atom_off(row, col / 8) + (col % 8) * 2; }

constexpr bool layouts_agree() {
  for (int kk = 0; kk < D_QK / 16; ++kk)      // QK: A = Q (64 rows), B = K (32 keys from key 32g), K-major, SBO 1 KB
    for (int row = 0; row < 64; ++row)
      for (int k = 0; k < 16; ++k) {
        const uint32_t start = (kk >> 2) * ATOM4 + (kk & 3) * 32;
        if (kmajor_addr(start, 1024, row, k) != tile_addr(row, kk * 16 + k)) return false;
        if (kmajor_addr(start + (row / 32) * 32 * 128, 1024, row % 32, k) != tile_addr(row, kk * 16 + k)) return false;
      }
  for (int g = 0; g < 2; ++g)                 // PV: B = V (keys x 512 dims), N-major, LBO 8 KB, SBO 1 KB
    for (int kk = 0; kk < BN4 / 16; ++kk)
      for (int n = 0; n < 256; ++n)
        for (int k = 0; k < 16; ++k)
          if (mnmajor_addr(4 * g * ATOM4 + kk * 16 * 128, ATOM4, 1024, n, k) != tile_addr(kk * 16 + k, 256 * g + n))
            return false;
  for (int kk = 0; kk < BN4 / 16; ++kk)       // PV: A = P (rows x 64 keys, one atom), K-major
    for (int row = 0; row < 64; ++row)
      for (int k = 0; k < 16; ++k)
        if (kmajor_addr(kk * 32, 1024, row, k) != tile_addr(row, kk * 16 + k)) return false;
  return true;
}
static_assert(layouts_agree(), "a v4 shared-memory writer disagrees with the wgmma descriptor that reads it");

// wgmma shared-memory descriptor, 128-byte swizzle: start address, leading and stride byte offsets (PTX ISA,
// "Matrix Descriptor Format"); the base offset stays 0 because every atom starts on a 1024-byte boundary.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
// The descriptor of the operand `bytes` further on: the start-address field (bits 0-13, address / 16) cannot carry
// into the next field because every shared address of the CTA is below 256 KB (checked on Cfg4).
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most N of this warp's most recent wgmma groups are pending (the earlier ones are complete).
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void wgmma_wait_all() { wgmma_wait<0>(); }
// Keep the compiler from moving accesses of accumulator registers across wgmma issue and wait.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// S[64 x 32] = (accumulate ? S : 0) + A[64 x 16] B[16 x 32]; A and B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_qk(float (&d)[16], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(accumulate));
}

// O[64 x 256] += A[64 x 16] B[16 x 256]; A K-major, B N-major (transposed) in shared memory.
__device__ __forceinline__ void wgmma_pv(float (&d)[128], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, 1, 1, 1, 0, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db));
}

#endif  // sm_90a

// visible(col, row): may tile row `row` (0..63) see key column `col` (0..63) of this step?
template <typename Visible>
__device__ __forceinline__ void step4(uint32_t qt, uint32_t kt, uint32_t vt, uint32_t pt, __nv_bfloat16* ps,
                                      float* red, float scale, float (&o)[32][4], float (&m)[2], float (&l)[2],
                                      bool full, Visible visible) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = warp >> 2, wq = warp & 3;
  const int r0 = wq * 16 + (lane >> 2), c0 = (lane & 3) * 2;  // rows r0 and r0 + 8; columns c0, c0 + 1 of each n8
  float s[16];
  fence_regs(s);
  wgmma_fence();
  // Descriptors are built once per step; the unrolled slices add their byte offset / 16 to the start-address
  // field (desc_advance), an immediate add instead of rebuilding every field.
  const uint64_t dq = desc_sw128(qt, 16, 1024), dk = desc_sw128(kt + g * 32 * 128, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < D_QK / 16; ++kk) {
    const uint32_t koff = (kk >> 2) * ATOM4 + (kk & 3) * 32;
    wgmma_qk(s, desc_advance(dq, koff), desc_advance(dk, koff), kk > 0);
  }
  wgmma_commit();
  wgmma_wait_all();
  fence_regs(s);
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = g * 32 + j * 8 + c0 + (e & 1), row = r0 + (e >> 1) * 8;
      s[4 * j + e] = (full || visible(col, row)) ? s[4 * j + e] * scale : -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * j + e]);
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    if ((lane & 3) == 0) red[g * 64 + r0 + h * 8] = mx[h];
  }
  __syncthreads();
  float alpha[2];
  bool bump_any = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float both = fmaxf(mx[h], red[(1 - g) * 64 + r0 + h * 8]);
    const bool bump = both > m[h] + RESCALE_SLACK;  // the same decision in both warpgroups
    alpha[h] = bump ? exp2f(m[h] - both) : 1.f;
    bump_any |= bump;
    if (bump) m[h] = both;
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float base = m[h] == -INFINITY ? 0.f : m[h];
      const float p0 = exp2f(s[4 * j + 2 * h] - base), p1 = exp2f(s[4 * j + 2 * h + 1] - base);
      sum[h] += p0 + p1;
      const int row = r0 + h * 8, col = g * 32 + j * 8 + c0;
      *reinterpret_cast<uint32_t*>(reinterpret_cast<unsigned char*>(ps) + tile_addr(row, col)) = pack_bf16(p0, p1);
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + sum[h];
  rescale_rows<1, 32>(reinterpret_cast<float(&)[1][32][4]>(o), reinterpret_cast<const float(&)[1][2]>(alpha), bump_any);
  fence_proxy_async();
  __syncthreads();  // both halves of P written; red read by both warpgroups
  float(&acc)[128] = reinterpret_cast<float(&)[128]>(o);
  fence_regs(acc);
  wgmma_fence();
  const uint64_t dp = desc_sw128(pt, 16, 1024), dv = desc_sw128(vt + 4 * g * ATOM4, ATOM4, 1024);
#pragma unroll
  for (int kk = 0; kk < BN4 / 16; ++kk) wgmma_pv(acc, desc_advance(dp, kk * 32), desc_advance(dv, kk * 16 * 128));
  wgmma_commit();
  wgmma_wait_all();
  fence_regs(acc);
#else
  __trap();
#endif
}


// Where load_q_tile and draft_pipeline put 16-byte chunk `ch` (0..71) of row `r` (0..63) of the 64-row tile at
// `base`: its swizzle atoms (atom_off).
__device__ __forceinline__ auto atom_tile(unsigned char* base) {
  return [base](int r, int ch) { return reinterpret_cast<__nv_bfloat16*>(base + atom_off(r, ch)); };
}

// A draft-block CTA of either kernel: step4 over the draft keys, 64 per step, K (k_extend, bf16) loaded into the
// 72 KB tile at kring and V (v_extend) into the next, each row seeing the keys its tree mask allows. qt: shared
// address of the Q tile; ps: the 64 x 64 P tile; red: 2 x 64 floats; o, m, l: this thread's accumulators, reference
// maxima (log2 units) and row sums.
__device__ __forceinline__ void draft_block4(const Params& p, const Work& w, unsigned char* kring, uint32_t qt,
                                             __nv_bfloat16* ps, float* red, float (&o)[32][4], float (&m)[2],
                                             float (&l)[2]) {
  unsigned char* ks = kring;
  unsigned char* vs = kring + Cfg4<2>::TILE_BYTES;
  const DraftMask dm = draft_mask(p, w);
  const uint32_t pt = smem_u32(ps);
  draft_pipeline<BN4, Cfg4<2>::THREADS, true>(p, w, atom_tile(ks), atom_tile(vs), [&](int key0) {
    step4(qt, smem_u32(ks), smem_u32(vs), pt, ps, red, p.scale_draft, o, m, l, false,
          [&](int col, int row) { return draft_visible(dm, (w.row0 + row) / p.H, key0 + col); });
  });
}

// The end of both kernels. Each warpgroup holds the row sums over its own keys (v4 and the draft block: a half of
// every step; v5's prefix: its tiles); the two meet in red (2 x 64 floats), and the thread (lane, warpgroup g, warp
// wq of it) writes its rows 16 wq + lane / 4 + 8h (h < 2) of the partial: columns 256g..256g+255 of o, the reference
// maximum m and the summed row sum; rows from p.R on are skipped. lane, g and wq come by reference: by value, nvcc
// orders one commutative operand the other way and v4's SASS changes.
__device__ __forceinline__ void write_partials4(const Params& p, const Work& w, float* red, const int& lane,
                                                const int& g, const int& wq, const float (&o)[32][4],
                                                const float (&m)[2], const float (&l)[2]) {
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float s = l[h];
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if ((lane & 3) == 0) red[g * 64 + wq * 16 + (lane >> 2) + h * 8] = s;
  }
  __syncthreads();
  const float vscale = w.draft ? 1.f : p.v_scale;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int rr = wq * 16 + (lane >> 2) + h * 8;
    const float lsum = red[rr] + red[64 + rr];
    const int gr = w.row0 + rr;
    if (gr < p.R)
      write_partial_row<32>(p, w.part0 + gr, m[h], lsum, vscale, g == 0 && (lane & 3) == 0, g * 256, o, h);
  }
}

}  // namespace kdt
