// kdtree-lab MLA tree-verify attention: the launcher. It holds the configuration table (one entry per kernel
// configuration, each made by its kernel's header from its own template parameters), the automatic selection per
// device, and the C ABI of kdtree_verify.h. The kernels live by role and arch:
//   common/      PTX wrappers (ptx.cuh) and the frame every kernel shares (frame.cuh: Params, work setup,
//                the prefix and draft-block pipelines, the tree mask, the partial-row epilogue)
//   mma_sync/    warp-level mma.sync kernels (sm_80..sm_120): verify_sm120 (what sm_120 runs), verify_rows32 (v3,
//                Hopper-sized shared memory), verify_split (v1, forced only)
//   sm90/        the sm_90a warpgroup-MMA kernels: v5 (the default on compute capability 9.x: v4 with its two
//                warpgroups out of step) and v4 (forced, and its e4m3 variant, which fp8 pools run under v5)
//   combine/     the kernel that merges the split partials by their log-sum-exps
//   ceilings/    the mma.sync peak loop the benchmark measures beside the kernels
// Work decomposition: grid = (row_tiles, nsplit + 1, bs); row tiles are the fastest grid dimension so the CTAs
// sharing one prefix range run together and read the latent KV from DRAM once; split nsplit is the draft block.
#include "kdtree_verify.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "ceilings/mma_peak.cuh"
#include "combine/verify_reduce.cuh"
#include "mma_sync/verify_rows32.cuh"
#include "mma_sync/verify_sm120.cuh"
#include "mma_sync/verify_split.cuh"
#include "sm90/verify_wgmma.cuh"
#include "sm90/verify_wgmma_v5.cuh"

namespace kdt {
namespace {

// The table. Automatic selection (kdtree_verify_select_config): on compute capability 9.x, when the library holds
// sm_90a code (KDT_SM90A_BUILT, set by the build when sm_90a is among its archs) and the device's opt-in shared
// memory per block fits it, the wgmma kernel v5 (v4 stays forced-only); otherwise the first entry of kAutoConfigs
// that fits: v3 (rows32) on Hopper-sized shared memory (227 KB), the sm_120 kernel on 99 KB. v1 (verify_split) is
// never chosen automatically; kdtree_verify_force_config picks any entry (tests and benchmarks time the sm_120
// configuration and v1 on a Hopper GPU that way).
const ConfigEntry kConfigs[] = {rows32_entry<2>(), sm120_entry<2>(), split_entry<32, 2>(), wgmma_entry<2>(),
                                 sm120_fp8_entry(), wgmma_fp8_entry(), wgmma_v5_entry()};
// The e4m3-pool variants of the sm_120 kernel and of v4 (issue 17): an fp8 pool on configuration 1 runs 4, on 3 or 6
// (v5) runs 5;
// v3 and v1 refuse fp8 pools (KDT_ERR_UNSUPPORTED).
constexpr int kSm120Config = 1, kSm120Fp8Config = 4, kWgmmaFp8Config = 5;
constexpr int kAutoConfigs[] = {0, 1};
constexpr int kWgmmaConfig = 3, kWgmmaV5Config = 6;
// The wgmma configurations (v4, its e4m3 variant, v5): compute capability 9.x only (sm_90a), and an fp8 pool on any
// of them runs v4's e4m3 variant.
constexpr bool is_wgmma(int i) { return i == kWgmmaConfig || i == kWgmmaFp8Config || i == kWgmmaV5Config; }
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

// The combine kernel after the split kernel on stream s: reduce_warps(nsplit + 1) warps per (row, quarter), and on
// compute capability 9.0 and later with programmatic stream serialization, so that it launches while the split
// kernel's last CTAs run (they call griddepcontrol.launch_dependents) and waits in griddepcontrol.wait.
template <int W>
bool launch_combine_w(const Params& p, bool pdl, cudaStream_t s) {
  const dim3 grid((p.R * 4 + 4 / W - 1) / (4 / W), p.bs);
  cudaLaunchConfig_t lc = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  lc.gridDim = grid;
  lc.blockDim = dim3(128);
  lc.stream = s;
  lc.attrs = attr;
  lc.numAttrs = pdl ? 1 : 0;
  if (cudaLaunchKernelEx(&lc, verify_reduce_kernel<W>, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

bool launch_combine(const Params& p, bool pdl, cudaStream_t s) {
  switch (reduce_warps(p.nsplit + 1)) {
    case 1: return launch_combine_w<1>(p, pdl, s);
    case 2: return launch_combine_w<2>(p, pdl, s);
    default: return launch_combine_w<4>(p, pdl, s);
  }
}

}  // namespace
}  // namespace kdt

using namespace kdt;

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
      kConfigs[kWgmmaV5Config].cfg.dynamic_smem <= smem_optin_bytes)
    return kWgmmaV5Config;
  for (int i : kAutoConfigs)
    if (kConfigs[i].cfg.dynamic_smem <= smem_optin_bytes) return i;
  return -1;
}

int kdtree_verify_config_for_pool(int index, int kv_dtype) {
  if (index < 0 || index >= kNumConfigs) return -KDT_ERR_BAD_SHAPE;
  const bool fp8_variant = index == kSm120Fp8Config || index == kWgmmaFp8Config;
  if (kv_dtype == KDT_KV_BF16) return fp8_variant ? -KDT_ERR_BAD_DTYPE : index;
  if (kv_dtype != KDT_KV_FP8_E4M3) return -KDT_ERR_BAD_DTYPE;
  if (index == kSm120Config || index == kSm120Fp8Config) return kSm120Fp8Config;
  if (is_wgmma(index)) return kWgmmaFp8Config;
  return -KDT_ERR_UNSUPPORTED;
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
    case KDT_ERR_BAD_DTYPE: return "unknown kv_dtype code, or a bf16 pool on a forced e4m3 (fp8) configuration";
    case KDT_ERR_WORKSPACE: return "workspace is NULL, not 16-byte aligned, or smaller than kdtree_verify_workspace_bytes()";
    case KDT_ERR_UNSUPPORTED: return "unsupported by this kernel configuration (fp8 KV pools: the sm_120 kernel and v4 only)";
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
  if (!aligned16(q) || !aligned16(k_extend) || !aligned16(v_extend) || !aligned16(k_buffer) ||
      q_stride_token % 8 || q_stride_head % 8 || k_extend_stride % 8 || v_extend_stride % 8 || k_buffer_stride % 8 ||
      (kv_dtype == KDT_KV_FP8_E4M3 && k_buffer_stride % 16) ||
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
  const int idx = kdtree_verify_config_for_pool(g_forced_config >= 0 ? g_forced_config : g_config_of_device[dev] - 1,
                                                kv_dtype);
  if (idx < 0) return -idx;
  // wgmma exists on sm_90a only; elsewhere the kernel body is a trap (reachable here only when forced)
  if (is_wgmma(idx) && g_cc_of_device[dev] / 10 != 9) return KDT_ERR_DEVICE;
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
  // KDT_NO_PDL=1 (read once per process): launch the combine without PDL, to time the difference (docs/performance.md)
  static const bool no_pdl = getenv("KDT_NO_PDL") != nullptr;
  return launch_combine(p, g_cc_of_device[dev] >= 90 && !no_pdl, s) ? KDT_OK : KDT_ERR_LAUNCH;
}

int kdtree_verify_mma_ceiling(int blocks, int iters, float* sink, void* stream) {
  if (blocks < 1 || iters < 1 || sink == nullptr) return KDT_ERR_BAD_SHAPE;
  mma_peak_kernel<<<blocks, MMA_PEAK_THREADS, 0, static_cast<cudaStream_t>(stream)>>>(iters, sink);
  return cudaGetLastError() == cudaSuccess ? KDT_OK : KDT_ERR_LAUNCH;
}

}  // extern "C"
