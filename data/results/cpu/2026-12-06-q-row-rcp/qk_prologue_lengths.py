"""The QK warps' prologue of the role-split kernels in SASS, in instructions: from each `setmaxnreg` (or the `EXIT`
that ends the path before it, where two paths share the one setmaxnreg) to the next QK-group barrier (`bar.sync
0x4`), per kernel and arch, and the ptxas spill lines (a build from
`scripts/sass_identity.py build OUT --kernels DIR --timing`).

    python data/results/cpu/2026-12-06-q-row-rcp/qk_prologue_lengths.py OUT
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
build = Path(sys.argv[1])
for kernel in ("verify_sm120_e4m3_kernel", "verify_sm120_roles_kernel"):
    for arch in ("sm_90a", "sm_120a"):
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "sass_census.py"), str(build / "lib.so"),
                              "--kernel", kernel, "--arch", arch, "--timeline"], capture_output=True, text=True,
                             check=True).stdout
        start, lengths = None, []
        for line in out.splitlines():
            m = re.match(r"\s*(0x[0-9a-f]+)\s+(.*)", line)
            if not m:
                continue
            at = int(m.group(1), 16)
            if "setmaxnreg" in m.group(2) or m.group(2).startswith("EXIT"):
                start = at
            if "bar.sync 0x4" in m.group(2) and start is not None:
                lengths.append((at - start) // 16)
        print(f"{kernel:27s} {arch:8s} QK prologues (instructions): {lengths}")
log = (build / "ptxas.log").read_text()
for name, arch, spill in re.findall(r"entry function '(\w*(?:e4m3_kernel|roles_kernel)\w*)' for '(\w+)'.*?\n.*?\n\s*"
                                    r"\d+ bytes stack frame, (\d+) bytes spill stores", log):
    print(f"{name} {arch}: {spill} bytes spill stores")
