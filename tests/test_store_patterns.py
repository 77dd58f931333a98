"""scripts/store_patterns.cu builds for both archs and issues, per rep, exactly the stores each pattern names (the
widths and counts its header describes: a benchmark whose stores the compiler dropped or split would time something
else), and the wrapper's table reads its JSON. No GPU: the timing itself is a device call's
(docs/experiments/store-patterns-run.sh)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kdtree_lab.core.cuda_tools import find_cuda_tool, find_nvcc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import sass_identity  # noqa: E402
import store_patterns  # noqa: E402

# pattern index (the kernel's template argument) -> (store opcode, stores a rep a thread)
EXPECTED = {0: ("STG.E.64", 64), 1: ("STG.E.128", 32), 2: ("STG.E.128", 32), 3: ("STG.E.128", 32),
            4: ("STG.E.64", 32)}


@pytest.mark.skipif(not find_nvcc() or not find_cuda_tool("cuobjdump"), reason="needs nvcc and cuobjdump")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_120a"])
def test_each_pattern_issues_the_stores_it_names(arch, tmp_path):
    exe = store_patterns.build(arch, tmp_path / "store_patterns")
    sass = subprocess.run([find_cuda_tool("cuobjdump"), "-sass", str(exe)], capture_output=True, text=True,
                          check=True).stdout
    found = {}
    for fn, body in sass_identity.functions(sass).items():
        m = re.search(r"store_kernelILi(\d)E", fn)
        if m:
            found[int(m.group(1))] = re.findall(r"\bSTG\.E[.0-9A-Z]*", body)
    assert sorted(found) == sorted(EXPECTED), f"{arch}: kernels found {sorted(found)}"
    for pat, (op, count) in EXPECTED.items():
        assert found[pat] == [op] * count, f"{arch} pattern {pat}: expected {count} x {op}, found {found[pat]}"


def test_the_table_names_each_pattern_and_grid():
    result = {"gpu": "G", "sms": 132, "sm_clock_khz": 1980000, "reps": 65, "launches": 25,
              "rows": [{"pattern": "mma_f2", "ctas": 132, "bytes_per_cta": 131072, "rep_us": 2.5,
                        "bytes_per_clk_per_sm": 26.5},
                       {"pattern": "mma_f2", "ctas": 1, "bytes_per_cta": 131072, "rep_us": 1.5,
                        "bytes_per_clk_per_sm": 44.1}]}
    text = store_patterns.table(result)
    assert "132 SMs" in text and "every SM" in text and "1 CTA" in text and "26.5 B/clk/SM" in text
