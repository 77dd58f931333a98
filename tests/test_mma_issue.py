"""scripts/mma_issue.cu builds for both archs and issues, per loop, exactly the MMAs and FFMAs each variant names
(CHAINS mma.sync per iteration, FILL FFMAs beside each: a benchmark whose MMAs the compiler merged or whose FFMAs it
dropped would time something else), and the wrapper's table reads its JSON. No GPU: the timing itself is a device
call's (docs/experiments/mma-issue-run.sh)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kdtree_lab.core.cuda_tools import find_cuda_tool, find_nvcc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import mma_issue  # noqa: E402
import sass_census  # noqa: E402
import sass_identity  # noqa: E402

# the stall ptxas writes after each MMA of a loop of MMAs alone (docs/performance.md, "What bounds the e4m3
# configuration", reads a warp's issue interval from it: 6 cycles on sm_90a; 15 and a NOP, 16, on sm_120a)
MMA_STALL = {"sm_90a": 6, "sm_120a": 15}
NOPS_PER_MMA = {"sm_90a": 0, "sm_120a": 1}

# (kind, chains, fill) of every variant the .cu file times
VARIANTS = {(k, c, f) for k in (0, 1) for c, f in ((4, 0), (8, 0), (4, 4), (8, 4), (4, 8))}


@pytest.mark.skipif(not find_nvcc() or not find_cuda_tool("cuobjdump"), reason="needs nvcc and cuobjdump")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_120a"])
def test_each_variant_issues_its_mmas_and_ffmas(arch, tmp_path):
    exe = mma_issue.build(arch, tmp_path / "mma_issue")
    sass = subprocess.run([find_cuda_tool("cuobjdump"), "-sass", str(exe)], capture_output=True, text=True,
                          check=True).stdout
    found = {}
    for fn, body in sass_identity.functions(sass).items():
        m = re.search(r"issue_kernelILi(\d)ELi(\d)ELi(\d)E", fn)
        if m:
            found[tuple(int(g) for g in m.groups())] = body
    assert set(found) == VARIANTS, f"{arch}: kernels found {sorted(found)}"
    for (kind, chains, fill), body in found.items():
        mmas = re.findall(r"\bHMMA\.16816\.F32(\.BF16)?\b", body)
        assert mmas and len(mmas) % chains == 0, f"{arch} {kind, chains, fill}: {len(mmas)} MMAs"
        assert all(bool(m) == (kind == 1) for m in mmas), f"{arch} {kind, chains, fill}: the wrong MMA kind"
        ffma = len(re.findall(r"\bFFMA\b", body))
        # the unrolled loop's FILL FFMAs a MMA (and none where FILL is 0: the timing loop holds MMAs only)
        assert ffma == fill * len(mmas), f"{arch} {kind, chains, fill}: {ffma} FFMA for {len(mmas)} MMAs"
        if fill == 0:
            loop = max(sass_census.mma_loops(sass_census.instructions(body), sass_census.stall_counts(body)),
                       key=lambda r: r["MMA"])
            assert loop["mma_stall"] == MMA_STALL[arch], f"{arch} {kind, chains}: {loop}"
            assert loop["NOP"] // loop["MMA"] == NOPS_PER_MMA[arch], f"{arch} {kind, chains}: {loop}"


def test_the_table_names_each_variant():
    result = {"gpu": "G", "sms": 132, "iters": 4096,
              "rows": [{"kind": "f16", "warps_per_scheduler": 1, "chains": 4, "fill": 0, "warp_cycles_per_mma": 15.2,
                        "mmas_per_100_cycles_per_scheduler": 6.58},
                       {"kind": "bf16", "warps_per_scheduler": 2, "chains": 8, "fill": 4, "warp_cycles_per_mma": 14.0,
                        "mmas_per_100_cycles_per_scheduler": 14.29}]}
    text = mma_issue.table(result)
    assert "132 SMs" in text and "f16  W 1  chains 4  FFMA a MMA 0" in text and "15.20 cycles" in text
    assert "bf16 W 2  chains 8  FFMA a MMA 4" in text and "14.29 MMAs" in text


def test_benchmarks_and_the_loader_name_a_gpus_arch_alike():
    """One rule names an arch for cubins (core.cuda_tools.arch_name): the loader's gpu_arch and run_benchmark use it."""
    from kdtree_lab.core.cuda_tools import arch_name

    assert [arch_name(*cc) for cc in ((9, 0), (10, 0), (12, 0), (8, 9), (8, 0))] == [
        "sm_90a", "sm_100a", "sm_120a", "sm_89", "sm_80"]
