// kdtree-lab: MLA tree-verify attention over SGLang's target-verify buffers (C ABI).
//
// One call verifies a batch of draft trees: for request b, every draft node i and local head h attends to the
// request's prefix (pool rows kv_indices[kv_indptr[b] .. kv_indptr[b+1]) of k_buffer, 576 dims for QK, the first
// 512 of the same row for V) and to the draft block (k_extend / v_extend rows of the request) under the tree
// mask (custom_mask, SGLang FULL_MASK layout) or causally (custom_mask == NULL).
//
// Capture safety: the grid is fixed by the host integers (bs, num_draft, num_heads, nsplit); everything that
// depends on lengths is read on the device; the call allocates nothing, never syncs the host and launches only
// on `stream`. Every entry returns a kdt_status and never aborts the process.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KDT_ABI_VERSION 8

#if defined(__GNUC__)
#define KDT_API __attribute__((visibility("default")))
#else
#define KDT_API
#endif

typedef enum {
  KDT_OK = 0,
  KDT_ERR_NULL_POINTER = 1,   // a required pointer is NULL
  KDT_ERR_BAD_SHAPE = 2,      // bs / num_draft / num_heads / nsplit out of range
  KDT_ERR_BAD_STRIDE = 3,     // a stride or base pointer breaks the 16-byte alignment the loads need
  KDT_ERR_BAD_DTYPE = 4,      // unknown dtype code
  KDT_ERR_WORKSPACE = 5,      // workspace NULL, misaligned or smaller than kdtree_verify_workspace_bytes()
  KDT_ERR_UNSUPPORTED = 6,    // a valid request this build does not serve (e.g. an fp8 pool)
  KDT_ERR_LAUNCH = 7,         // the CUDA launch failed (see cudaGetLastError)
  KDT_ERR_DEVICE = 8,         // the device query failed or the GPU has too little shared memory
} kdt_status;

// Device-side status bits, OR-ed into the first 4 bytes of the workspace during a call (graph safe: read them
// after the step and zero them when you like).
#define KDT_FLAG_INDEX_OUT_OF_POOL 1u  // a kv_indices entry was outside [0, pool_rows); slot 0 was read instead
#define KDT_FLAG_QO_INDPTR 2u          // qo_indptr gave a request more than num_draft rows; extra rows ignored
#define KDT_FLAG_KV_INDPTR 4u          // kv_indptr gave a request an end before its start; its prefix was read as empty

// kv_dtype codes
#define KDT_KV_BF16 0
#define KDT_KV_FP8_E4M3 1

// Bytes of workspace one call needs for (bs, num_draft, num_heads, nsplit): a 256-byte header (status word),
// fp32 partial outputs and log-sum-exps for nsplit prefix splits and one draft split, then the e4m3 Q pass's terms and
// row scales (each request's num_draft x num_heads rows padded to 64; 1,156 B a row; read by the e4m3 configurations,
// held for every configuration so that one size serves them all).
KDT_API size_t kdtree_verify_workspace_bytes(int max_bs, int num_draft, int num_heads, int nsplit);

KDT_API int kdtree_verify_attn_flash_paged_cg(
    const void* q, int64_t q_stride_token, int64_t q_stride_head,            // bf16 [T, H, 576]
    const void* k_extend, int64_t k_extend_stride,                            // bf16 [T, 1, 576]
    const void* v_extend, int64_t v_extend_stride,                            // bf16 [T, 1, 512]
    void* o, int64_t o_stride_token, int64_t o_stride_head,                  // bf16 [T, H, 512]
    const void* k_buffer, int64_t k_buffer_stride, int64_t pool_rows, int kv_dtype,  // [P, 1, 576]
    const void* qo_indptr, int qo_indptr_is_int64,                            // int32 or int64 [bs+1]
    const int32_t* kv_indptr,                                                 // int32 [bs+1]
    const int64_t* kv_indices,                                                // int64 [>= kv_indptr[bs]]
    const uint8_t* custom_mask,                                               // bool/uint8 bytes or NULL
    const int64_t* mask_indptr,                                               // int64 [bs+1]
    int bs, int num_draft, int num_heads, int nsplit,
    float sm_scale, float k_scale, float v_scale,
    void* workspace, size_t workspace_bytes,
    void* stream);                                                            // cudaStream_t

// One kernel configuration of the launcher's table: its launch shape and its properties. Automatic selection, the
// KV-pool mapping and the arch check are derived from these fields alone.
typedef struct {
  int block_m;          // rows (draft node x head) per CTA
  int stages;           // KV tile pipeline depth (ring slots)
  int threads;          // threads per CTA
  int dynamic_smem;     // bytes of dynamic shared memory per CTA
  int block_n;          // keys per pipeline step
  int arch;             // 0: any arch the library is built for (mma.sync); 90: compute capability 9.x, sm_90a code
  unsigned kv_dtypes;   // the KV pools the kernel itself reads: bit (1 << KDT_KV_*)
  int fp8_config;       // the configuration an fp8 pool runs when this one is selected or forced (itself when it
                        // reads fp8 pools) under exact fp8 math; -1: fp8 pools are refused
  int fp8_e4m3_config;  // the configuration an fp8 pool runs under e4m3 tensor-core math (KDT_FP8_MATH_E4M3, and
                        // KDT_FP8_MATH_AUTO where fp8_e4m3_default); -1: none (that math runs fp8_config)
  int fp8_e4m3_default; // 1: automatic fp8 math takes fp8_e4m3_config for this configuration
  int auto_priority;    // 0: forced only; else automatic selection takes the eligible one with the highest
  int min_rows, max_rows;  // automatic selection gives it calls of min_rows <= N x H <= max_rows (0: no bound)
  int cluster;          // CTAs per row tile, one thread-block cluster (grid x = row tiles x cluster)
} kdt_config;

KDT_API int kdtree_verify_num_configs(void);
KDT_API int kdtree_verify_config(int index, kdt_config* out);           // the configs compiled in
KDT_API const char* kdtree_verify_config_name(int index);               // its kernel, e.g. "verify_sm120_roles_kernel<64>"
// Index of the configuration (kdtree_verify_select_config) or -1: a pure function of the device's opt-in shared
// memory per block (bytes), compute capability (major*10+minor) and SM count, and of the call's batch size, draft
// tokens and heads, so a captured graph's configuration (and split count) stays valid for every replay. Among the
// configurations with auto_priority > 0 whose arch, shared memory and row range admit the call, the highest
// priority.
KDT_API int kdtree_verify_select_config(int smem_optin_bytes, int compute_capability, int num_sms, int bs,
                                        int num_draft, int num_heads);
// Index a call runs on configuration `index` (selected or forced) over a pool of `kv_dtype` (KDT_KV_*): itself when
// it reads that pool, else for an fp8 pool its fp8_e4m3_config or fp8_config as the fp8 math set says; -KDT_ERR_UNSUPPORTED when it has none,
// -KDT_ERR_BAD_DTYPE for an unknown dtype or a bf16 pool on a forced e4m3 variant.
KDT_API int kdtree_verify_config_for_pool(int index, int kv_dtype);
KDT_API const char* kdtree_verify_strerror(int status);
// Tests and benchmarks: force config `index` for every later call in this process (-1 = automatic again).
KDT_API int kdtree_verify_force_config(int index);
// The math an fp8 pool runs for every later call in this process (read on the host at launch, like the forced
// configuration): KDT_FP8_MATH_AUTO (each configuration's fp8_e4m3_default), KDT_FP8_MATH_EXACT (the e4m3 -> bf16 /
// f16 conversion path, fp8_config) or KDT_FP8_MATH_E4M3 (Q and P rounded to e4m3, e4m3 tensor cores: fp8_e4m3_config
// where the configuration has one). Returns the mode set before, or -KDT_ERR_BAD_SHAPE for an unknown mode.
#define KDT_FP8_MATH_AUTO 0
#define KDT_FP8_MATH_EXACT 1
#define KDT_FP8_MATH_E4M3 2
KDT_API int kdtree_verify_set_fp8_math(int mode);
KDT_API int kdtree_verify_abi_version(void);
// Benchmarks: `blocks` CTAs of 256 threads each issue iters x 8 mma.sync per warp with fp32 accumulation, of kind
// 0: bf16 m16n8k16, 1: f16 m16n8k16 (4,096 FLOP each), 2: e4m3 m16n8k32 (8,192 FLOP each), i.e.
// blocks * 8 * iters * 8 * FLOP per instruction; one float per warp is written to sink (device, >= blocks * 8 floats).
KDT_API int kdtree_verify_mma_ceiling(int blocks, int iters, int kind, float* sink, void* stream);
// Development: the phase clocks of a library built with KDT_PHASE_CLOCKS=1 (kernels/common/phase.cuh, PhaseBuffers).
// Returns the buffer's size in bytes (0 from every other build) or a negative status; `clear` != 0 zeroes it, `dst`
// (host memory of `bytes` >= that size) receives a copy; both wait for the device to finish its work first.
KDT_API long long kdtree_verify_phase_clocks(void* dst, size_t bytes, int clear);

#ifdef __cplusplus
}
#endif
