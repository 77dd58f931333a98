"""The launch plan's one home: the split rule, the workspace formula and the plan over batch sizes, torch-free;
every module that sizes a workspace or picks a split count takes them from kdtree_lab.launch_plan."""

import ast
import subprocess
import sys
from pathlib import Path

from kdtree_lab import launch_plan
from kdtree_lab.contract import sglang_capture_sizes
from kdtree_lab.paths import ROOT


def test_plan_is_the_largest_workspace_over_its_batch_sizes():
    sizes = sglang_capture_sizes(48)
    p = launch_plan.plan(sizes, 16, 8, 132, 64)
    assert p.splits == {bs: launch_plan.default_nsplit(bs, 16, 8, 132, 64) for bs in sizes}
    assert p.workspace_bytes == max(launch_plan.workspace_bytes(bs, 16, 8, s) for bs, s in p.splits.items())
    fixed = launch_plan.plan(sizes, 16, 8, 132, 64, nsplit=4)
    assert set(fixed.splits.values()) == {4} and fixed.workspace_bytes == launch_plan.workspace_bytes(48, 16, 8, 4)


def test_workspace_layout():
    # header, then 4-byte partial rows of 512 and an fp32 LSE per row padded to 256 bytes
    rows = 2 * (3 + 1) * 16 * 8
    assert launch_plan.workspace_bytes(2, 16, 8, 3) == 256 + rows * 512 * 4 + (rows * 4 + 255) // 256 * 256
    assert launch_plan.workspace_bytes(2, 16, 8, 3, partial_bytes=2) < launch_plan.workspace_bytes(2, 16, 8, 3)


def test_launch_plan_imports_without_torch():
    code = ("import sys, kdtree_lab.launch_plan, kdtree_lab.budget, kdtree_lab.abi, kdtree_lab.mla; "
            "sys.exit('torch' in sys.modules or 'kdtree_lab.loader' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def _defines(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return names


def test_one_home_for_the_split_rule_the_workspace_the_mla_constants_and_the_c_abi():
    homes = {"default_nsplit": "launch_plan.py", "MAX_NSPLIT": "launch_plan.py", "HEADER_BYTES": "launch_plan.py",
             "workspace_bytes": "launch_plan.py", "D_QK": "mla.py", "D_V": "mla.py", "MODEL_SM_SCALE": "mla.py",
             "KERNEL_DEFAULT_SM_SCALE": "mla.py", "ABI_VERSION": "abi.py", "KV_BF16": "abi.py", "KV_CODES": "abi.py",
             "FLAG_INDEX_OUT_OF_POOL": "abi.py", "KdtConfig": "abi.py", "declare": "abi.py", "_declare": "abi.py"}
    for path in sorted((ROOT / "kdtree_lab").glob("*.py")):
        for name in _defines(path) & set(homes):
            assert path.name == homes[name], f"{name} defined in {path.name}, its home is {homes[name]}"
