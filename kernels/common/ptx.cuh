// PTX wrappers shared by every kernel: shared-memory addresses, cp.async, ldmatrix, mma.sync m16n8k16 (bf16 in,
// fp32 accumulate), named barriers, the generic-to-async proxy fence. Each instruction here exists on sm_80 and
// later, sm_120a included, except fence.proxy.async (sm_90 and later; used by the wgmma kernel only).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace kdt {

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

__device__ __forceinline__ void* smem_ptr(uint32_t addr) { return __cvta_shared_to_generic(addr); }

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
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Four floats -> four e4m3 bytes (x0 the low byte), round to nearest even, saturated to +-448 (NaN stays NaN).
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return (uint32_t)lo | ((uint32_t)hi << 16);
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// Programmatic dependent launch (sm_90 and later): the split kernels let the combine kernel launch early, and the
// combine kernel waits there until the split kernel's writes are complete and visible. No-ops before sm_90.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// Two e4m3 values (the low byte of `two` is the first) -> f16x2 in one instruction (sm_89 and later), exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"((unsigned short)two));
  return h;
}
// Two e4m3 values (the low byte is the first element) -> bf16x2, exactly: to f16x2, then through fp32 (every e4m3
// value is a bf16 value).
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t two) {
  const uint32_t h = e4m3x2_to_f16x2(two);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  return pack_bf16(f.x, f.y);
}
// Eight e4m3 values (two words, the first element in the low byte of lo) -> one 16-byte chunk of eight bf16,
// exactly: how the wgmma kernels turn half of a staged e4m3 chunk into their bf16 tile.
__device__ __forceinline__ uint4 e4m3x8_to_bf16x8(uint32_t lo, uint32_t hi) {
  return make_uint4(e4m3x2_to_bf16x2(lo), e4m3x2_to_bf16x2(lo >> 16), e4m3x2_to_bf16x2(hi),
                    e4m3x2_to_bf16x2(hi >> 16));
}

// e4m3 x e4m3 -> fp32, m16n8k32 (sm_89 and later). A: 16 x 32 row-major, register i holds 4 consecutive k (bytes,
// low first): rows g (i = 0, 2) / g + 8 (i = 1, 3), k 4 t4 .. + 3 (i < 2) / 16 + 4 t4 .. (i >= 2); B: 32 x 8
// col-major, register j holds k 16 j + 4 t4 .. + 3 of column g; D as m16n8k16 (g = lane / 4, t4 = lane % 4).
// On sm_120a it is issued as the block-scaled form (kind::mxf8f6f4, scale 2^0 for A and B: the same products and
// sums): on GB202, with fp32 accumulation, the plain form runs at the bf16 rate and the block-scaled form at twice
// it (RTX 5090: 370.0 and 737.1 TFLOP/s, main-horse.github.io/posts/5090-mm-perf). Elsewhere the plain form (sm_90
// has no e4m3 tensor-core MMA: ptxas emulates it with e4m3 -> f16 conversions and f16 MMAs).
// KDT_E4M3_EMULATED: this compilation emulates e4m3 MMAs (no e4m3 tensor cores, not the timing library); kernels
// shape their register use for the emulation there.
#if !defined(KDT_E4M3_TIMING_PROXY) && !defined(__CUDA_ARCH_FEAT_SM120_ALL) && !defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define KDT_E4M3_EMULATED 1
#endif
// KDT_E4M3_TIMING_PROXY (the timing library, kdtree_lab.kernels.build.e4m3_timing_proxy): one f16 m16n8k16 on the
// same registers instead, wrong values, sm_120a's instruction stream on a GPU that emulates e4m3 (timing only).
// A_EXP: A is taken times 2^A_EXP (exactly: the block scale of A on sm_120a; the f16 conversion elsewhere).
template <int A_EXP = 0>
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(A_EXP >= -16 && A_EXP <= 0, "a scale of A the f16 emulation holds exactly");
#if defined(KDT_E4M3_TIMING_PROXY)
  mma_f16(d, a, b0, b1);
#elif defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)
  constexpr uint32_t sa = 0x01010101u * (uint32_t)(127 + A_EXP);  // ue8m0: 2^(byte - 127)
  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sa), "r"(0x7f7f7f7fu));
#else
  // no e4m3 tensor-core MMA here: exact e4m3 -> f16 conversions and two f16 m16n8k16 MMAs accumulating in place,
  // the k order permuted alike in A and B (f16 k 2 t4, + 1 / 8 + 2 t4, + 1 are e4m3 k 4 t4, + 1 / 4 t4 + 2, + 3 of
  // each 16-k half); cheaper in registers than ptxas's own emulation of the e4m3 form
  auto cvt = [](uint32_t two) {
    uint32_t h = e4m3x2_to_f16x2(two);
    if (A_EXP != 0) {  // f16 holds e4m3 values times 2^-16 and more exactly (subnormals from 2^-24)
      const __half2 s = __floats2half2_rn(ldexpf(1.f, A_EXP), ldexpf(1.f, A_EXP));
      __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&h), s);
      h = *reinterpret_cast<uint32_t*>(&v);
    }
    return h;
  };
  const uint32_t lo[4] = {cvt(a[0]), cvt(a[1]), cvt(a[0] >> 16), cvt(a[1] >> 16)};
  mma_f16(d, lo, e4m3x2_to_f16x2(b0), e4m3x2_to_f16x2(b0 >> 16));
  const uint32_t hi[4] = {cvt(a[2]), cvt(a[3]), cvt(a[2] >> 16), cvt(a[3] >> 16)};
  mma_f16(d, hi, e4m3x2_to_f16x2(b1), e4m3x2_to_f16x2(b1 >> 16));
#endif
}
// Bytes of a picked by selector (prmt.b32 with a zero second operand: nibble k of sel names result byte k).
__device__ __forceinline__ uint32_t prmt0(uint32_t a, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(0u), "r"(sel));
  return d;
}
// Bytes of the pair (a, b) picked by selector (prmt.b32: nibble k of sel names result byte k; bytes 0-3 are a's,
// 4-7 b's).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
__device__ __forceinline__ uint2 ld_shared_v2(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_v2(uint32_t addr, uint32_t x, uint32_t y) {
  asm volatile("st.shared.v2.u32 [%0], {%1,%2};\n" ::"r"(addr), "r"(x), "r"(y) : "memory");
}
// Shared-memory accesses at addr + OFF, OFF the instruction's immediate (no register holds the sum across a loop)
template <int OFF>
__device__ __forceinline__ uint2 ld_shared_v2_at(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2+%3];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr), "n"(OFF) : "memory");
  return v;
}
template <int OFF>
__device__ __forceinline__ uint32_t ld_shared_u32_at(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1+%2];\n" : "=r"(v) : "r"(addr), "n"(OFF) : "memory");
  return v;
}
template <int OFF>
__device__ __forceinline__ void st_shared_u32_at(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0+%1], %2;\n" ::"r"(addr), "n"(OFF), "r"(v) : "memory");
}
template <int OFF>
__device__ __forceinline__ uint4 ld_shared_v4_at(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4+%5];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr), "n"(OFF)
               : "memory");
  return v;
}
template <int OFF>
__device__ __forceinline__ void st_shared_u8_at(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u8 [%0+%1], %2;\n" ::"r"(addr), "n"(OFF), "r"(v) : "memory");
}


// mbarriers in shared memory (sm_80 and later; try_wait sm_90 and later, sm_120a included): a phase completes when
// `count` arrivals have been made; a waiter spins on the phase's parity.
__device__ __forceinline__ void mbar_init(uint32_t addr, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
// The spin on try_wait.parity (SEM: its semantics and scope; "" is .acquire.cta), one label per inlined copy.
#define KDT_MBAR_WAIT_ASM(SEM)                                          \
  "{\n .reg .pred p;\n"                                                 \
  "KDT_MBAR_WAIT_%=:\n"                                                  \
  " mbarrier.try_wait.parity" SEM ".shared::cta.b64 p, [%0], %1;\n"     \
  " @!p bra KDT_MBAR_WAIT_%=;\n}\n"
#ifdef KDT_DEBUG_WAITS
#include <stdio.h>
// Debug build (KDT_DEBUG_WAITS=1 in the environment of the build, kdtree_lab/kernels/build.py): a wait that has not
// completed after 2 s prints its block, thread, mbarrier (shared address) and parity, then traps, so a hang in a
// new kernel ends the call with the barrier named instead of running into the call's time limit. The trap leaves
// the CUDA context unusable: the process must exit.
#define KDT_MBAR_TRY_ASM(SEM)                                                             \
  "{\n .reg .pred p;\n mbarrier.try_wait.parity" SEM ".shared::cta.b64 p, [%1], %2;\n" \
  " selp.u32 %0, 1, 0, p;\n}\n"
#define KDT_DEBUG_WAIT(SEM)                                                                                         \
  do {                                                                                                             \
    uint64_t t0 = 0, now = 0;                                                                                      \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));                                                         \
    for (uint32_t ok = 0;;) {                                                                                      \
      asm volatile(KDT_MBAR_TRY_ASM(SEM) : "=r"(ok) : "r"(addr), "r"(parity) : "memory");                          \
      if (ok) break;                                                                                               \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));                                                      \
      if (now - t0 > 2000000000ull) {                                                                              \
        printf("kdtree-lab: mbarrier wait stuck 2 s: block (%d, %d, %d) thread %d, mbarrier at shared 0x%x, "    \
               "parity %u\n", blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, addr, parity);                   \
        __trap();                                                                                                  \
      }                                                                                                            \
    }                                                                                                              \
  } while (0)
__device__ __forceinline__ void mbar_wait(uint32_t addr, uint32_t parity) { KDT_DEBUG_WAIT(""); }
#else
__device__ __forceinline__ void mbar_wait(uint32_t addr, uint32_t parity) {
  asm volatile(KDT_MBAR_WAIT_ASM("") ::"r"(addr), "r"(parity) : "memory");
}
#endif
// One arrival (release: this thread's earlier shared-memory writes are visible to the threads whose wait then
// completes, which acquire).
__device__ __forceinline__ void mbar_arrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
// The mbarrier at addr receives one arrival when every cp.async this thread issued before has completed (the
// arrival is not pre-counted: .noinc, so the barrier's count includes it).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(addr) : "memory");
}
__device__ __forceinline__ uint32_t ld_global_nc_u32(const void* ptr) {
  uint32_t v;
  asm volatile("ld.global.nc.b32 %0, [%1];\n" : "=r"(v) : "l"(ptr));
  return v;
}
__device__ __forceinline__ void ld_global_nc_v4(uint32_t (&a)[4], const void* ptr) {
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "l"(ptr));
}

// Move this warpgroup's register allocation to N per thread (setmaxnreg: sm_90a and sm_120a; executed by all four
// warps of a warpgroup). A no-op where the target has no setmaxnreg (the kernel then needs N <= its launch cap).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM120_ALL)
#define KDT_HAS_SETMAXNREG 1
#endif
template <int N>
__device__ __forceinline__ void regs_inc() {
#ifdef KDT_HAS_SETMAXNREG
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void regs_dec() {
#ifdef KDT_HAS_SETMAXNREG
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

__device__ __forceinline__ void bar_named(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrive at named barrier `id` without waiting (release: this thread's earlier shared-memory writes are visible to
// the threads that then pass bar_named(id, threads)): one producer side of a producer / consumer hand-off.
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace kdt
