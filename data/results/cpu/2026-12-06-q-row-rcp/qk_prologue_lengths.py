"""The QK warps' prologue of the role-split kernels in SASS, in instructions: from each `setmaxnreg` (or the `EXIT`
that ends the path before it, where two paths share the one setmaxnreg) to the next QK-group barrier (`bar.sync
0x4`), per kernel and arch, from `scripts/sass_census.py`'s timeline, and the two kernels' ptxas resource lines
(`scripts/sass_identity.py`'s reading of them), of a build from `scripts/sass_identity.py build OUT --kernels DIR
--timing`.

    python data/results/cpu/2026-12-06-q-row-rcp/qk_prologue_lengths.py OUT
"""
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from sass_census import census, timeline  # noqa: E402
from sass_identity import resources  # noqa: E402

KERNELS = ("verify_sm120_e4m3_kernel", "verify_sm120_roles_kernel")


def prologues(rows: list[dict]) -> list[int]:
    """Instructions from each setmaxnreg (or EXIT) to the next QK-group barrier, in a timeline's rows."""
    start, lengths = None, []
    for row in rows:
        at = int(row["start"], 16)
        if row["event"] in ("setmaxnreg", "EXIT"):
            start = at
        elif row["event"].startswith("bar.sync 0x4") and start is not None:
            lengths.append((at - start) // 16)
    return lengths


build = Path(sys.argv[1])
for kernel in KERNELS:
    for arch in ("sm_90a", "sm_120a"):
        for rows in census(build / "lib.so", kernel, arch, timeline).values():
            print(f"{kernel:27s} {arch:8s} QK prologues (instructions): {prologues(rows)}")
for key, line in resources((build / "ptxas.log").read_text()).items():
    if any(k in key for k in KERNELS):
        print(f"{key}: {line}")
