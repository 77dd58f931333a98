"""The launch plan's one home: the split rule, the workspace formula and the plan over batch sizes, torch-free;
every module that sizes a workspace or picks a split count takes them from kdtree_lab.kernels.launch_plan."""

import ast
import subprocess
import sys
from pathlib import Path

from kdtree_lab.contract.spec import sglang_capture_sizes
from kdtree_lab.core.paths import ROOT
from kdtree_lab.kernels import launch_plan


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
    budget = " ".join(f"kdtree_lab.budget.{p.stem}," for p in sorted((ROOT / "kdtree_lab" / "budget").glob("*.py")))
    code = (f"import sys, kdtree_lab.kernels.launch_plan, {budget} kdtree_lab.kernels.abi, kdtree_lab.core.mla; "
            "sys.exit('torch' in sys.modules or 'kdtree_lab.kernels.loader' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def _defines(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return names


def test_one_home_for_the_split_rule_the_workspace_the_mla_constants_and_the_c_abi():
    plan, mla, abi, dtypes = "kernels/launch_plan.py", "core/mla.py", "kernels/abi.py", "core/dtypes.py"
    homes = {"default_nsplit": plan, "MAX_NSPLIT": plan, "HEADER_BYTES": plan, "workspace_bytes": plan,
             "D_QK": mla, "D_V": mla, "MODEL_SM_SCALE": mla, "KERNEL_DEFAULT_SM_SCALE": mla, "ABI_VERSION": abi,
             "KV_BF16": abi, "KV_CODES": abi, "FLAG_INDEX_OUT_OF_POOL": abi, "KdtConfig": abi, "declare": abi,
             "_declare": abi, "KV_DTYPES": dtypes, "kv_dtype_name": dtypes}
    pkg = ROOT / "kdtree_lab"
    for path in sorted(pkg.rglob("*.py")):
        where = path.relative_to(pkg).as_posix()
        for name in _defines(path) & set(homes):
            assert where == homes[name], f"{name} defined in {where}, its home is {homes[name]}"
