"""The runs of record the tables quote (data/results/h200/README.md indexes every folder and its command), the
shapes they select, and the kernel names they look up."""

from __future__ import annotations

from kdtree_lab.core.paths import RESULTS


# The H200 results of record these tables quote (data/results/h200/README.md indexes every folder and its command).
H200_V3 = RESULTS / "h200" / "2026-11-29-v3-kernel"  # kernel v3 (mma.sync), eager timing, every earlier version
H200_V4 = RESULTS / "h200" / "2026-11-29-v4-wgmma"  # kernel v4 (wgmma), the sm_90a default
H200_BENCH = H200_V4 / "bench-issue.json"  # the issue grid, CUDA-graph replay timing
H200_SM120 = RESULTS / "h200" / "2026-12-01-sm120"  # the sm_120 kernel forced on the H200 beside v1, v3, v4
H200_V5 = RESULTS / "h200" / "2026-12-01-v5"  # kernel v5, the sm_90a default since
V5_BENCH = H200_V5 / "call6-bench" / "bench-issue.json"  # the issue grid, v5 (cuda) and v4 (cuda_wgmma), one run
V5_FIXED = H200_V5 / "call6-bench" / "fixed-cost-repeat.json"  # B = 1 calls alone and inside a graph of 10
PROFILE_V5 = H200_V5 / "call1-profile" / "profile-v5.json"  # v4 (config 3) and v5 (config 6), GPU time
FP8_BENCH = RESULTS / "h200" / "2026-12-01-fp8-register-path" / "call3-bench" / "bench-fp8.json"  # each shape over both pools
PROFILE_V3 = H200_V3 / "profile-v3.json"
PROFILE_V3B = H200_V3 / "profile-v3b.json"
PROFILE_VERSIONS = H200_V3 / "profile-versions.json"
PROFILE_V4A = H200_V4 / "profile-v4.json"  # v4 and v3 at the old split counts
PROFILE_V4_SPLITS = H200_V4 / "profile-v4-nsplit.json"  # both with the wave-aware split count
PROFILE_V4 = H200_V4 / "profile-v4b.json"  # v4 as committed (descriptors built once per step)
HEADLINE = (1, 200_000, 16, 8)  # B, L, N, H
PROFILE_SHAPES = {"headline": "1, 200k, 16, 8", "mem": "1, 200k, 4, 8", "deploy": "8, 200k, 16, 8",
                  "b48": "48, 32k, 16, 8", "big": "1, 200k, 64, 128"}
V3, V4, V5 = "verify_rows32_kernel<64,2>", "verify_wgmma_kernel<64,2>", "verify_wgmma_v5_kernel<64>"
SM120_BENCH = H200_SM120 / "bench-issue.json"
SM120_SHAPES = [(1, 200_000, 16, 8), (1, 200_000, 4, 8), (8, 200_000, 16, 8), (8, 200_000, 4, 8),
                (48, 200_000, 4, 8), (48, 32_768, 16, 8), (1, 32_768, 64, 16), (1, 200_000, 64, 128)]
# Issue 28's run of record: the issue grid with v5 (`cuda`), v4, both sm_120 configurations forced and SGLang, one run.
SM120_RUN = RESULTS / "h200" / "2026-12-01-sm120-per-shape" / "call2-bench-issue" / "bench-issue.json"
NCU_ROLES = RESULTS / "h200" / "2026-12-01-halves-and-gates" / "call6-ncu" / "ncu-roles.txt"  # the second generation
SM120_FIRST, SM120_ROLES = "cuda_sm120", "cuda_sm120_roles"
SPLIT_FLOOR = RESULTS / "h200" / "2026-12-01-split-floor"  # split kernel and combine at short prefixes, two floors
H200_FIXED = RESULTS / "h200" / "2026-12-01-fp8-register-path"
FIXED_MAIN = H200_FIXED / "call4-fixed-cost" / "fixed-cost-main.json"  # the combine before it read used splits only
FIXED_NOW = H200_FIXED / "call4-fixed-cost" / "fixed-cost-patch.json"  # the combine as landed
# issue 52's fixed cost: the sm_120 e4m3 forms' marginal cost in a graph of ten calls, main's run of record on the H200
# (landing-run.sh grid, beside the card-floor grid of the same call)
FIXED_CARD = RESULTS / "h200" / "2026-12-06-pair-sum-and-record" / "call2-issue52-grid" / "fixed-cost-driver.json"
FIXED_CARD_TIMING_LIBRARY = True  # it ran under KDT_E4M3_TIMING=1 (landing-run.sh; the result records it too, which counts)
ISSUE18_BENCH = H200_FIXED / "call6-bench" / "bench-issue.json"  # the issue grid, v4 and the sm_120 kernel as landed
XQA_PEER = RESULTS / "h200" / "2026-12-01-xqa-peer" / "xqa-peer.json"  # scripts/xqa_peer.py's run of record
BUILD_OF_RECORD = RESULTS / "h200" / "2026-12-01-sm120-per-shape" / "call1-notebooks" / "build.json"
CURRENT_SHAPES = [(1, 200_000, 16, 8), (1, 200_000, 4, 8), (8, 200_000, 16, 8), (8, 200_000, 4, 8),
                  (48, 32_768, 16, 8), (1, 32_768, 64, 16), (1, 200_000, 64, 128), (8, 32_768, 64, 128)]
# The e4m3 tensor-core configuration (issue 36): the mma.sync ceilings per instruction, its accuracy beside the exact
# path and SGLang's own fp8 kernel, the issue grid's fp8 rows on the timing library (what sm_120a issues).
E4M3_DIR = RESULTS / "h200" / "2026-12-02-e4m3"
E4M3_CEILING = RESULTS / "h200" / "2026-12-02-e4m3-ceiling" / "mma-ceilings.json"
E4M3_ACCURACY = E4M3_DIR / "call5-q-split" / "e4m3-lab.json"  # Q as two e4m3 terms (as landed)
E4M3_ACCURACY_ONE_TERM = E4M3_DIR / "call4-accuracy-hook" / "e4m3-accuracy.json"  # Q as one e4m3 term (tried)
E4M3, FP8_EXACT = "cuda_sm120_e4m3", "cuda_sm120_fp8"
E4M3_32 = "cuda_sm120_e4m3_32"  # the 32-row e4m3 configuration (issue 46), what 32 rows and fewer run over fp8
CHAIN_BENCH = RESULTS / "h200" / "2026-12-02-sglang-backend" / "call7-chain" / "bench-chain.json"
B12X_BENCH = RESULTS / "h200" / "2026-12-04-b12x" / "bench-b12x.json"  # b12x beside ours (issue 51), 72 shapes
B12X_P64_BENCH = RESULTS / "h200" / "2026-12-04-b12x" / "bench-b12x-p64.partial.json"  # b12x over 64-token pages
# Nsight Compute of each configuration an sm_120 card runs, forced on the H200: (impl, pool, shape) -> report
_NCU = RESULTS / "h200" / "2026-12-02-e4m3-early-refill"
NCU_SM120_RUNS = {("cuda_sm120", "bf16", "1, 200k, 4, 8"): _NCU / "call4-ncu-32-rows" / "ncu-cuda_sm120-bf16-mem.txt",
                  ("cuda_sm120_fp8", "fp8", "1, 200k, 4, 8"): _NCU / "call4-ncu-32-rows" / "ncu-cuda_sm120_fp8-fp8-mem.txt",
                  ("cuda_sm120_roles", "bf16", "1, 200k, 16, 8"): _NCU / "ncu-cuda_sm120_roles-bf16-headline.txt",
                  ("cuda_sm120_e4m3", "fp8", "1, 200k, 16, 8"): _NCU / "call2-landed" / "ncu-cuda_sm120_e4m3-fp8-headline.txt"}
