// kdtree-lab: C entry points (for ctypes) around NVIDIA's XQA MLA kernel, the vendor peer of scripts/xqa_peer.py.
//
// The kernel and its host launcher are FlashInfer's, compiled unchanged from the sources scripts/fetch_xqa.sh takes
// out of the flashinfer-python wheel into .xqa/ (put on the include path; nothing of them is in this repository).
// This file only includes them and adds what a Python caller needs: the compile-time facts the caller sizes its
// buffers with, and one launch that returns a status instead of throwing. Flags (scripts/xqa_source.py):
// -DMLA_BF16=1 -DCACHE_ELEM_ENUM=0 (bf16) or -DCACHE_ELEM_ENUM=2 (fp8 e4m3), -DTOKENS_PER_PAGE=16..128,
// -DHEAD_ELEMS=576 -DHEAD_GRP_SIZE=128, --expt-relaxed-constexpr.
//
// Driver API symbols (cuTensorMapEncodeTiled, cuGetErrorName) stay undefined in the shared library: the caller
// loads libcuda.so.1 with RTLD_GLOBAL first, so no libcuda is needed at link time (a CPU machine has none).
// Loading the library initialises CUDA (XQA sets its kernel's shared-memory attribute in a static initialiser),
// so it is loaded on a GPU machine only.
#include "mla_sm120.cu"
#include "tensorMap.cpp"

#include <cstring>
#include <exception>

#define XQA_PEER_API extern "C" __attribute__((visibility("default")))

namespace {
char g_error[512] = "";

int fail(char const* what) {
  std::strncpy(g_error, what, sizeof(g_error) - 1);
  g_error[sizeof(g_error) - 1] = '\0';
  return 1;
}
}  // namespace

// Compile-time facts of this build.
XQA_PEER_API uint32_t xqa_peer_tokens_per_page() { return tokensPerPage; }
XQA_PEER_API uint32_t xqa_peer_tokens_per_tile() { return tokensPerTile; }  // KV tokens per pipeline step
XQA_PEER_API uint32_t xqa_peer_cache_elem_bytes() { return sizeof(CacheElem); }  // 2: bf16, 1: e4m3 (Q too)
XQA_PEER_API uint32_t xqa_peer_head_group() { return headGrpSize; }  // query heads per KV head (128)
XQA_PEER_API uint32_t xqa_peer_head_elems() { return validElemsPerHead; }  // 576 (Q and K), V: the first 512
XQA_PEER_API uint32_t xqa_peer_dynamic_smem() { return hostSmemSize; }  // bytes per CTA, as launched

// Scratch bytes launchMLA needs for `batch` requests of one query token each split into `nb_sub_seq` KV
// sub-sequences: per cluster the two producers' P buffers, then per (token, sub-sequence) one partial result.
XQA_PEER_API uint64_t xqa_peer_scratch_bytes(uint32_t batch, uint32_t nb_sub_seq) {
  uint64_t const units = uint64_t(batch) * nb_sub_seq;
  return units * sizeof(Vec<CgaXBuffer, nbProducerCtasPerCga>) + units * sizeof(PartialResult);
}

// One decode call (q_len 1): out bf16 [batch][128][512], q [batch][128][576] in the cache's element type, kv the
// paged latent cache (K and V are the same rows; V reads the first 512 elements), page_list int32
// [batch][max_seq_len / tokens_per_page], seq_lens uint32 [batch] (tokens each query attends to, its own
// included), semaphores uint32 [batch] zeroed once (the kernel leaves them zero), strides in elements.
// XQA_NB_SUB_SEQ in the environment, when set, is the number of KV sub-sequences launchMLA splits each request
// into; the scratch must hold that many. Returns 0, or 1 with xqa_peer_last_error() saying why.
XQA_PEER_API int xqa_peer_launch(float q_scale, void* out, void const* q, void* kv, int32_t const* page_list,
                                 uint32_t max_seq_len, uint32_t const* seq_lens, uint32_t batch, float kv_scale,
                                 uint32_t* semaphores, void* scratch, int enable_pdl, uint64_t stride_page,
                                 uint64_t stride_token, uint64_t stride_head, void* stream) {
  try {
    static cudaDeviceProp const prop = [] {
      int dev = 0;
      checkCuda(cudaGetDevice(&dev));
      cudaDeviceProp p{};
      checkCuda(cudaGetDeviceProperties(&p, dev));
      return p;
    }();
    auto* cache = static_cast<GMemCacheHead*>(kv);
    launchMLA(prop, 1, q_scale, nullptr, static_cast<OutputHead*>(out), static_cast<InputHead const*>(q), cache,
              cache, page_list, max_seq_len, seq_lens, batch, kv_scale, nullptr, semaphores, scratch,
              enable_pdl != 0, stride_page, stride_token, stride_head, static_cast<cudaStream_t>(stream));
    return 0;
  } catch (std::exception const& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown C++ exception from launchMLA");
  }
}

XQA_PEER_API char const* xqa_peer_last_error() { return g_error; }
