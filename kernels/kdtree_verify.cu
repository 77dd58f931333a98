// kdtree-lab MLA tree-verify attention: the launcher. It holds the configuration table (one entry per kernel
// configuration, each made by its kernel's header from its own template parameters), the automatic selection per
// device, and the C ABI of kdtree_verify.h. The kernels live by role and arch:
//   common/      PTX wrappers (ptx.cuh), the frame every kernel shares (frame.cuh: Params, work setup,
//                the prefix and draft-block pipelines, the tree mask, the partial-row epilogue) and the
//                shared-memory layouts host checks share (layout.cuh)
//   mma_sync/    warp-level mma.sync kernels (sm_80..sm_120): what sm_120 runs, verify_sm120 (32 rows and fewer)
//                and its second generation verify_sm120_roles (above 32 rows), the e4m3 tensor-core forms
//                verify_sm120_e4m3 and verify_sm120_e4m3_32 (fp8 pools) with their Q pass (e4m3_q_pass.cuh: Q's
//                e4m3 terms once per call, the split kernel its PDL dependent), and what roles and e4m3 share
//                (roles_common.cuh: the context, the m-tile softmax, the P hand-off, the epilogue)
//   sm90/        the sm_90a warpgroup-MMA kernels: v5 (the default on compute capability 9.x: v4 with its two
//                warpgroups out of step) and v4 (forced, and its e4m3 variant, which fp8 pools run under v5), and
//                the frame both use (wgmma_common.cuh: swizzle atoms, descriptors, wgmma wrappers, v4's step,
//                the draft block, the epilogue)
//   combine/     the kernel that merges the split partials by their log-sum-exps
//   ceilings/    the mma.sync peak loop the benchmark measures beside the kernels
//   checks/      host programs that check a kernel's tile layout exhaustively (tests/test_kernel_layouts.py runs
//                each; none since the third form left)
// Work decomposition: grid = (row_tiles, nsplit + 1, bs); row tiles are the fastest grid dimension so the CTAs
// sharing one prefix range run together and read the latent KV from DRAM once; split nsplit is the draft block,
// at blockIdx.y 0 so that it is dispatched first (prefix split s at y = s + 1) where the grid fits one wave of the
// device's slots (SMs x the kernel's CTAs per SM), else at y = nsplit, last (setup_work, Params::draft_first).
#include "kdtree_verify.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ceilings/mma_peak.cuh"
#include "combine/verify_reduce.cuh"
#include "mma_sync/e4m3_q_pass.cuh"
#include "mma_sync/verify_sm120.cuh"
#include "mma_sync/verify_sm120_e4m3.cuh"
#include "mma_sync/verify_sm120_e4m3_32.cuh"
#include "mma_sync/verify_sm120_roles.cuh"
#include "sm90/verify_wgmma.cuh"
#include "sm90/verify_wgmma_v5.cuh"

namespace kdt {
namespace {

// The table: each kernel header's entry (launch shape, name, the arch and KV pools it declares) plus the selection
// policy: the configuration an fp8 pool runs instead, the automatic priority (0: forced only) and the row range
// (N x H) automatic selection gives it. Selection, the pool mapping and the arch check read these fields only, and
// Python names a configuration by its kernel name (kdtree_verify_config_name), never by its position here.
//   v5 (sm_90a) on compute capability 9.x with sm_90a code; everywhere else the sm_120 kernel's second generation
//   (roles) above 32 rows, where 64-row tiles halve the KV reads per row, and the first sm_120 kernel for the rest
//   (32 rows and fewer, where half a 64-row tile would be empty, or less shared memory than roles' e4m3 variant's
//   100,968 B; docs/performance.md, "Per-shape choice on sm_120"). They fit any GPU with 100,968 / 86,912 B of shared
//   memory per block, so GPUs with Hopper-sized shared memory but no sm_90a code (B200, compute capability 10.0; an
//   H100 or H200 under a library built without sm_90a) run them too. v4 and the e4m3 variants are forced only (an
//   fp8 pool reaches the variants through fp8_variant / fp8_e4m3). v1, v3 and the third form (halves) left the table (git
//   tag last-with-v1-v3-halves); their results stay under data/results/.
struct Policy {
  const char* fp8_variant;  // kernel name of the configuration an fp8 pool runs (exact math); nullptr: itself or none
  int auto_priority, min_rows, max_rows;
  const char* fp8_e4m3 = nullptr;  // the configuration an fp8 pool runs on e4m3 tensor cores; nullptr: none
  bool e4m3_default = false;       // automatic fp8 math takes fp8_e4m3
};
struct Config {
  ConfigEntry e;
  Policy policy;
};
constexpr const char* kSm120Fp8 = "verify_sm120_kernel<32,2,true>";
constexpr const char* kWgmmaFp8 = "verify_wgmma_kernel<64,2,true>";
constexpr const char* kSm120E4m3 = "verify_sm120_e4m3_kernel<64>";
constexpr const char* kSm120E4m3x32 = "verify_sm120_e4m3_32_kernel";
const Config kConfigs[] = {
    {sm120_entry<2>(), {kSm120Fp8, 1, 1, 0, kSm120E4m3x32, true}},  // 32 rows: the e4m3 form of 32-row CTAs
    {sm120_roles_entry(), {kSm120Fp8, 2, 33, 0, kSm120E4m3, true}},
    {sm120_fp8_entry(), {nullptr, 0, 1, 0}},
    {wgmma_entry<2>(), {kWgmmaFp8, 0, 1, 0}},
    {wgmma_fp8_entry(), {nullptr, 0, 1, 0}},
    {wgmma_v5_entry(), {kWgmmaFp8, 4, 1, 0}},
    {sm120_e4m3_entry(), {nullptr, 0, 1, 0}},
    {sm120_e4m3_32_entry(), {nullptr, 0, 1, 0}},
};
#ifdef KDT_SM90A_BUILT
constexpr bool kHasSm90a = true;
#else
constexpr bool kHasSm90a = false;
#endif
constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

int index_of(const char* name) {
  for (int i = 0; i < kNumConfigs; ++i)
    if (strcmp(kConfigs[i].e.name, name) == 0) return i;
  return -1;
}

// Can configuration i run on a GPU of compute capability cc (major * 10 + minor)?
bool arch_ok(int i, int cc) {
  return kConfigs[i].e.arch == ARCH_MMA_SYNC || (kConfigs[i].e.arch == ARCH_SM90A && kHasSm90a && cc / 10 == 9);
}

constexpr int kMaxDevices = 64;
struct Device {
  int known, optin, cc, sms;  // opt-in shared memory per block, compute capability (major * 10 + minor), SMs
};
Device g_device[kMaxDevices];
unsigned g_attr_set[kMaxDevices];         // bit i: config i's shared-memory attribute is set on that device
int g_ctas_per_sm[kMaxDevices][kNumConfigs];  // config i's resident CTAs per SM there (set with its attribute)
int g_forced_config = -1;                 // kdtree_verify_force_config
int g_fp8_math = KDT_FP8_MATH_AUTO;       // kdtree_verify_set_fp8_math

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }
// The workspace of a call with bs requests, R rows each, nsplit splits: byte offsets of its regions and its size
// (kdtree_verify_workspace_bytes; Python's twin: launch_plan.workspace_bytes). A 256-byte header (the status word),
// fp32 partial rows for every (request, split or draft block, row), their fp32 LSEs (padded to 256 B), then the e4m3
// Q pass's rows (q8_rows of R per request): two e4m3 terms of D_QK bytes each, then an fp32 scale each (padded).
struct WorkspaceLayout {
  size_t o_part, lse_part, q8, q8_scale, bytes;
};
WorkspaceLayout workspace_layout(size_t bs, size_t R, size_t nsplit) {
  auto round256 = [](size_t n) { return (n + 255) / 256 * 256; };
  const size_t rows = bs * (nsplit + 1) * R, q8 = bs * q8_rows(R);
  WorkspaceLayout l;
  l.o_part = HEADER_BYTES;
  l.lse_part = l.o_part + rows * D_V * sizeof(float);
  l.q8 = l.lse_part + round256(rows * sizeof(float));
  l.q8_scale = l.q8 + q8 * 2 * Q8_TERM_BYTES;
  l.bytes = l.q8_scale + round256(q8 * sizeof(float));
  return l;
}

// kernel on stream s after the kernel before it, with programmatic stream serialization where pdl (compute
// capability 9.0 and later): it then launches while that kernel runs and waits in griddepcontrol.wait (pdl_wait)
// before reading what it writes, which that kernel lets it do by griddepcontrol.launch_dependents
bool launch_dependent(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem, const Params& p, bool pdl,
                      cudaStream_t s) {
  cudaLaunchConfig_t lc = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  lc.gridDim = grid;
  lc.blockDim = block;
  lc.dynamicSmemBytes = smem;
  lc.stream = s;
  lc.attrs = attr;
  lc.numAttrs = pdl ? 1 : 0;
  if (cudaLaunchKernelEx(&lc, kernel, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

// The combine kernel after the split kernel: reduce_warps(nsplit + 1) warps per (row, quarter), launched while the
// split kernel's last CTAs run (they call griddepcontrol.launch_dependents) where pdl.
template <int W>
bool launch_combine_w(const Params& p, bool pdl, cudaStream_t s) {
  return launch_dependent(verify_reduce_kernel<W>, dim3((p.R * 4 + 4 / W - 1) / (4 / W), p.bs), dim3(128), 0, p, pdl,
                          s);
}

// KDT_CARVEOUT=<percent 0..100> (read once per process, a timing switch; docs/performance.md, "The fixed cost per
// call"): one preferred shared-memory carveout for every split kernel, the combine and the e4m3 Q pass. 100 leaves an
// H200's SM the ~28 KB of L1 an sm_120 card keeps beside our 99 KB of shared memory (128 KB per SM there, 256 KB
// here), so what the H200's larger L1 would catch costs what it would on the card. Set on each device before its
// first launch.
// The percentage as kdtree_lab.kernels.build.carveout_switch reads it (ASCII digits only, <= 100), else -1.
int carveout_percent() {
  static const int pct = [] {
    const char* v = getenv("KDT_CARVEOUT");
    if (v == nullptr) return -1;
    long n = 0;
    const char* c = v;
    for (; *c >= '0' && *c <= '9' && n <= 100; ++c) n = n * 10 + (*c - '0');
    if (c == v || *c != '\0' || n > 100) {
      fprintf(stderr, "KDT_CARVEOUT: expected a percentage 0..100, found '%s'; ignored\n", v);
      return -1;
    }
    return (int)n;
  }();
  return pct;
}
bool g_carveout_set[kMaxDevices];  // the switch applied on that device
void apply_carveout_switch(int dev) {
  const int pct = carveout_percent();
  if (pct < 0 || g_carveout_set[dev]) return;
  for (int i = 0; i < kNumConfigs; ++i)
    cudaFuncSetAttribute(reinterpret_cast<const void*>(kConfigs[i].e.kernel),
                         cudaFuncAttributePreferredSharedMemoryCarveout, pct);
  cudaFuncSetAttribute(verify_reduce_kernel<1>, cudaFuncAttributePreferredSharedMemoryCarveout, pct);
  cudaFuncSetAttribute(verify_reduce_kernel<2>, cudaFuncAttributePreferredSharedMemoryCarveout, pct);
  cudaFuncSetAttribute(verify_reduce_kernel<4>, cudaFuncAttributePreferredSharedMemoryCarveout, pct);
  cudaFuncSetAttribute(e4m3_q_pass_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, pct);
  cudaGetLastError();  // leave no error of an attribute call behind for the launch checks
  g_carveout_set[dev] = true;
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
  return workspace_layout(max_bs, (size_t)num_draft * (size_t)num_heads, nsplit).bytes;
}

int kdtree_verify_num_configs(void) { return kNumConfigs; }

int kdtree_verify_config(int index, kdt_config* out) {
  if (out == nullptr) return KDT_ERR_NULL_POINTER;
  if (index < 0 || index >= kNumConfigs) return KDT_ERR_BAD_SHAPE;
  const Config& c = kConfigs[index];
  const int variant = c.policy.fp8_variant ? index_of(c.policy.fp8_variant) : -1;
  const bool fp8 = c.e.kv_dtypes & KV_FP8_BIT;
  const int e4m3 = !fp8 && c.policy.fp8_e4m3 ? index_of(c.policy.fp8_e4m3) : -1;
  *out = kdt_config{c.e.block_m, c.e.stages, c.e.threads, c.e.dynamic_smem, c.e.block_n, c.e.arch, c.e.kv_dtypes,
                    fp8 ? index : variant, e4m3, e4m3 >= 0 && c.policy.e4m3_default, c.policy.auto_priority,
                    c.policy.min_rows, c.policy.max_rows, c.e.cluster};
  return KDT_OK;
}

const char* kdtree_verify_config_name(int index) {
  return index >= 0 && index < kNumConfigs ? kConfigs[index].e.name : nullptr;
}

// The shared memory a configuration needs to be chosen automatically: its own and that of each pool variant it may
// switch to (kdtree_verify_config_for_pool), so that a chosen configuration's fp8 variants launch wherever it does.
static int auto_smem(const Config& c) {
  int s = c.e.dynamic_smem;
  const char* variants[2] = {c.policy.fp8_variant, c.policy.fp8_e4m3};
  for (const char* v : variants) {
    const int i = v ? index_of(v) : -1;
    if (i >= 0 && kConfigs[i].e.dynamic_smem > s) s = kConfigs[i].e.dynamic_smem;
  }
  return s;
}

int kdtree_verify_select_config(int smem_optin_bytes, int compute_capability, int num_sms, int bs, int num_draft,
                                int num_heads) {
  (void)num_sms;
  (void)bs;  // part of the contract: a later rule may use them (docs/performance.md, "Per-shape choice on sm_120")
  const int64_t rows = (int64_t)num_draft * num_heads;
  int best = -1;
  for (int i = 0; i < kNumConfigs; ++i) {
    const Config& c = kConfigs[i];
    if (c.policy.auto_priority <= 0 || !arch_ok(i, compute_capability) || auto_smem(c) > smem_optin_bytes ||
        rows < c.policy.min_rows || (c.policy.max_rows > 0 && rows > c.policy.max_rows))
      continue;
    if (best < 0 || c.policy.auto_priority > kConfigs[best].policy.auto_priority) best = i;
  }
  return best;
}

int kdtree_verify_config_for_pool(int index, int kv_dtype) {
  if (index < 0 || index >= kNumConfigs) return -KDT_ERR_BAD_SHAPE;
  if (kv_dtype != KDT_KV_BF16 && kv_dtype != KDT_KV_FP8_E4M3) return -KDT_ERR_BAD_DTYPE;
  const Config& c = kConfigs[index];
  if (c.e.kv_dtypes & (1u << kv_dtype)) return index;
  if (kv_dtype == KDT_KV_BF16) return -KDT_ERR_BAD_DTYPE;  // a bf16 pool on a forced e4m3 variant
  const bool tc = c.policy.fp8_e4m3 &&
                  (g_fp8_math == KDT_FP8_MATH_E4M3 || (g_fp8_math == KDT_FP8_MATH_AUTO && c.policy.e4m3_default));
  const int variant = tc ? index_of(c.policy.fp8_e4m3) : c.policy.fp8_variant ? index_of(c.policy.fp8_variant) : -1;
  return variant >= 0 ? variant : -KDT_ERR_UNSUPPORTED;
}

int kdtree_verify_set_fp8_math(int mode) {
  if (mode < KDT_FP8_MATH_AUTO || mode > KDT_FP8_MATH_E4M3) return -KDT_ERR_BAD_SHAPE;
  const int before = g_fp8_math;
  g_fp8_math = mode;
  return before;
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
    case KDT_ERR_BAD_DTYPE: return "unknown kv_dtype code, or a bf16 pool on a forced configuration that reads fp8 (e4m3) pools only";
    case KDT_ERR_WORKSPACE: return "workspace is NULL, not 16-byte aligned, or smaller than kdtree_verify_workspace_bytes()";
    case KDT_ERR_UNSUPPORTED: return "unsupported by this kernel configuration (fp8 KV pools: the sm_120 configurations and v4/v5 only)";
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
  Device& d = g_device[dev];
  if (!d.known) {
    int cc_major = 0, cc_minor = 0;
    if (cudaDeviceGetAttribute(&d.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return KDT_ERR_DEVICE;
    d.cc = cc_major * 10 + cc_minor;
    d.known = 1;
  }
  const int chosen = g_forced_config >= 0
                         ? g_forced_config
                         : kdtree_verify_select_config(d.optin, d.cc, d.sms, bs, num_draft, num_heads);
  if (chosen < 0) return KDT_ERR_DEVICE;
  const int idx = kdtree_verify_config_for_pool(chosen, kv_dtype);
  if (idx < 0) return -idx;
  // wgmma exists on sm_90a only; elsewhere the kernel body is a trap (reachable here only when forced)
  if (!arch_ok(idx, d.cc)) return KDT_ERR_DEVICE;
  apply_carveout_switch(dev);  // before the occupancy query below, which reads the carveout
  if (!(g_attr_set[dev] & (1u << idx))) {
    if (cudaFuncSetAttribute(reinterpret_cast<const void*>(kConfigs[idx].e.kernel),
                             cudaFuncAttributeMaxDynamicSharedMemorySize, kConfigs[idx].e.dynamic_smem) !=
        cudaSuccess) {
      cudaGetLastError();  // clear the non-sticky error: a forced config too large for this GPU
      return KDT_ERR_DEVICE;
    }
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kConfigs[idx].e.kernel, kConfigs[idx].e.threads,
                                                      kConfigs[idx].e.dynamic_smem) != cudaSuccess) {
      cudaGetLastError();
      return KDT_ERR_DEVICE;
    }
    g_ctas_per_sm[dev][idx] = per_sm;
    g_attr_set[dev] |= 1u << idx;
  }
  const ConfigEntry& ce = kConfigs[idx].e;

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
  const WorkspaceLayout wl = workspace_layout(bs, p.R, nsplit);
  p.status = reinterpret_cast<unsigned int*>(ws);
  p.o_part = reinterpret_cast<float*>(ws + wl.o_part);
  p.lse_part = reinterpret_cast<float*>(ws + wl.lse_part);
  p.q8 = ws + wl.q8;
  p.q8_scale = reinterpret_cast<float*>(ws + wl.q8_scale);

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const dim3 grid((p.R + ce.block_m - 1) / ce.block_m * ce.cluster, nsplit + 1, bs);
  // the draft block first only where every CTA of the grid is resident at once (one wave; setup_work)
  p.draft_first = (int64_t)grid.x * grid.y * grid.z <= (int64_t)d.sms * g_ctas_per_sm[dev][idx] ? 1 : 0;
  // KDT_NO_PDL=1 (read once per process): launch the combine and a Q pass's split kernel without PDL, to time the
  // difference (docs/performance.md)
  static const bool no_pdl = getenv("KDT_NO_PDL") != nullptr;
  const bool pdl = d.cc >= 90 && !no_pdl;
  if (ce.q_pass) {  // the e4m3 forms: Q's terms once per call, then the split kernel as its PDL dependent
    e4m3_q_pass_kernel<<<dim3(q8_rows(p.R) / QPass::GROUP_ROWS, bs), QPass::THREADS, 0, s>>>(p);
    if (cudaGetLastError() != cudaSuccess) return KDT_ERR_LAUNCH;
    if (!launch_dependent(ce.kernel, grid, dim3(ce.threads), ce.dynamic_smem, p, pdl, s)) return KDT_ERR_LAUNCH;
  } else {
    ce.kernel<<<grid, ce.threads, ce.dynamic_smem, s>>>(p);
    if (cudaGetLastError() != cudaSuccess) return KDT_ERR_LAUNCH;
  }
  return launch_combine(p, pdl, s) ? KDT_OK : KDT_ERR_LAUNCH;
}

int kdtree_verify_mma_ceiling(int blocks, int iters, int kind, float* sink, void* stream) {
  if (blocks < 1 || iters < 1 || sink == nullptr || kind < MMA_PEAK_BF16 || kind > MMA_PEAK_E4M3)
    return KDT_ERR_BAD_SHAPE;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (kind == MMA_PEAK_BF16)
    mma_peak_kernel<MMA_PEAK_BF16><<<blocks, MMA_PEAK_THREADS, 0, s>>>(iters, sink);
  else if (kind == MMA_PEAK_F16)
    mma_peak_kernel<MMA_PEAK_F16><<<blocks, MMA_PEAK_THREADS, 0, s>>>(iters, sink);
  else
    mma_peak_kernel<MMA_PEAK_E4M3><<<blocks, MMA_PEAK_THREADS, 0, s>>>(iters, sink);
  return cudaGetLastError() == cudaSuccess ? KDT_OK : KDT_ERR_LAUNCH;
}

long long kdtree_verify_phase_clocks(void* dst, size_t bytes, int clear) {
#if defined(KDT_PHASE_CLOCKS)
  const size_t size = sizeof(PhaseBuffers);
  if (cudaDeviceSynchronize() != cudaSuccess) return -KDT_ERR_DEVICE;
  if (dst != nullptr) {
    if (bytes < size) return -KDT_ERR_BAD_SHAPE;
    if (cudaMemcpyFromSymbol(dst, g_phase, size) != cudaSuccess) return -KDT_ERR_DEVICE;
  }
  if (clear) {
    void* addr = nullptr;
    if (cudaGetSymbolAddress(&addr, g_phase) != cudaSuccess || cudaMemset(addr, 0, size) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
      return -KDT_ERR_DEVICE;
  }
  return (long long)size;
#else
  (void)dst, (void)bytes, (void)clear;
  return 0;
#endif
}

}  // extern "C"
