"""The launch plan's one home: the split rule, the workspace formula and the plan over batch sizes, torch-free;
every module that sizes a workspace or picks a split count takes them from kdtree_lab.kernels.launch_plan."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kdtree_lab.contract.spec import sglang_capture_sizes
from kdtree_lab.core.paths import ROOT
from kdtree_lab.kernels import launch_plan

H200 = launch_plan.Device(132, 90, 232_448)
RTX = launch_plan.Device(188, 120, 101_376)
B200 = launch_plan.Device(148, 100, 232_448)  # compute capability 10.0: no sm_90a code runs there


def test_plan_is_the_largest_workspace_over_its_batch_sizes():
    sizes = sglang_capture_sizes(48)
    p = launch_plan.plan(sizes, 16, 8, "bf16", H200)
    assert {bs: b.nsplit for bs, b in p.batches.items()} == {bs: launch_plan.default_nsplit(bs, 16, 8, 132, 64)
                                                            for bs in sizes}
    assert p.workspace_bytes == max(launch_plan.workspace_bytes(bs, 16, 8, p.nsplit(bs)) for bs in sizes)
    fixed = launch_plan.plan(sizes, 16, 8, "bf16", H200, nsplit=4)
    assert {b.nsplit for b in fixed.batches.values()} == {4}
    assert fixed.workspace_bytes == launch_plan.workspace_bytes(48, 16, 8, 4)


def test_the_split_count_follows_the_row_tile_of_each_batch_sizes_configuration():
    """A select that answers a 64-row configuration for small batches and a 32-row one for large ones (as a per-shape
    choice may): each size's split count is the rule's at its own configuration's row tile."""
    wide, narrow = launch_plan.Config("wide", 64), launch_plan.Config("narrow", 32)
    p = launch_plan.plan(range(1, 9), 16, 8, "bf16", RTX, select=lambda bs, n, h, kv, dev: wide if bs < 4 else narrow)
    assert [p.config(bs) for bs in (1, 3, 4, 8)] == [wide, wide, narrow, narrow]
    assert all(p.nsplit(bs) == launch_plan.default_nsplit(bs, 16, 8, 188, p.config(bs).block_m) for bs in range(1, 9))


def test_select_names_the_configuration_by_device_and_pool(monkeypatch):
    pick = launch_plan.select
    assert pick(1, 16, 8, "bf16", H200).name == "verify_wgmma_v5_kernel<64>"
    assert pick(1, 16, 8, "fp8", H200).name == "verify_wgmma_kernel<64,2,true>"  # v5's pools run v4's e4m3 variant
    # Hopper-sized shared memory without sm_90a code (an H200 under a library built without it, B200): the sm_120
    # configurations, per shape
    for no_wgmma in (launch_plan.Device(132, 90, 232_448, sm90a=False), B200):
        assert pick(1, 16, 8, "bf16", no_wgmma).name == "verify_sm120_roles_kernel<64>"
        assert pick(1, 4, 8, "bf16", no_wgmma).name == "verify_sm120_kernel<32,2>"
        assert pick(1, 16, 8, "fp8", no_wgmma) == launch_plan.E4M3_SM120
    assert pick(8, 4, 16, "fp8", RTX, "exact") == launch_plan.Config("verify_sm120_kernel<32,2,true>", 32)
    assert pick(8, 4, 16, "fp8", RTX) == pick(1, 16, 8, "fp8", RTX) == launch_plan.E4M3_SM120  # above 32 rows
    assert pick(1, 4, 8, "fp8", RTX) == launch_plan.E4M3_SM120_32  # 32 rows: the 32-row e4m3 form
    assert pick(1, 4, 8, "fp8", RTX, "e4m3") == launch_plan.E4M3_SM120_32
    assert pick(1, 4, 8, "fp8", RTX, "exact").name == "verify_sm120_kernel<32,2,true>"
    assert pick(1, 16, 8, "fp8", H200, "e4m3").name == "verify_wgmma_kernel<64,2,true>"  # none on sm_90a: exact
    with pytest.raises(ValueError, match="fp8_math: expected one of auto, exact, e4m3, found 'fast'"):
        pick(1, 16, 8, "fp8", RTX, "fast")
    bf16_only = launch_plan.AutoConfig(launch_plan.Config("verify_bf16_only_kernel<64>", 64), smem=1_000)
    with monkeypatch.context() as m:  # every configuration of the table reads fp8; the rule still refuses one without
        m.setattr(launch_plan, "AUTO_CONFIGS", (bf16_only,))
        with pytest.raises(launch_plan.NoConfiguration, match=r"kv_dtype: verify_bf16_only_kernel<64>.*fp8"):
            pick(1, 16, 8, "fp8", launch_plan.Device(108, 80, 232_448))
        assert pick(1, 16, 8, "bf16", launch_plan.Device(108, 80, 232_448)).name == "verify_bf16_only_kernel<64>"
    with pytest.raises(launch_plan.NoConfiguration, match="device: no kernel configuration fits 1000 B"):
        pick(1, 16, 8, "bf16", launch_plan.Device(1, 120, 1000))


@pytest.mark.parametrize("args,needle", [
    (([0, 1], 16, 8), "batch_sizes: expected batch sizes >= 1"), (([], 16, 8), "batch_sizes"),
    (([1], 0, 8), "num_draft: expected an integer >= 1, found 0"), (([1], 16, -1), "num_heads"),
])
def test_plan_refuses_bad_sizes_in_one_line(args, needle):
    with pytest.raises(ValueError, match=needle):
        launch_plan.plan(*args, "bf16", H200)
    with pytest.raises(ValueError, match="nsplit: expected 0 .* or 1..512, found 513"):
        launch_plan.plan([1], 16, 8, "bf16", H200, nsplit=513)


def test_workspace_layout():
    # header, then 4-byte partial rows of 512 and an fp32 LSE per row padded to 256 bytes, then the e4m3 Q pass's
    # rows (each request's padded to 64): two e4m3 terms of 576 bytes and an fp32 scale, padded to 256 bytes
    rows = 2 * (3 + 1) * 16 * 8
    q8 = 2 * 128
    assert launch_plan.workspace_bytes(2, 16, 8, 3) == (256 + rows * 512 * 4 + (rows * 4 + 255) // 256 * 256
                                                        + q8 * 1152 + (q8 * 4 + 255) // 256 * 256)
    q8 = 3 * 64  # 4 x 8 = 32 rows a request, padded to 64
    assert launch_plan.workspace_bytes(3, 4, 8, 1) - launch_plan.workspace_bytes(3, 4, 8, 1, partial_bytes=0) == (
        3 * 2 * 4 * 8 * 512 * 4)
    assert launch_plan.workspace_bytes(3, 4, 8, 1, partial_bytes=0) == (256 + (3 * 2 * 32 * 4 + 255) // 256 * 256
                                                                       + q8 * 1152 + (q8 * 4 + 255) // 256 * 256)
    assert launch_plan.workspace_bytes(2, 16, 8, 3, partial_bytes=2) < launch_plan.workspace_bytes(2, 16, 8, 3)


def test_launch_plan_imports_without_torch():
    budget = " ".join(f"kdtree_lab.budget.{p.stem}," for p in sorted((ROOT / "kdtree_lab" / "budget").glob("*.py")))
    core = " ".join(f"kdtree_lab.core.{p.stem}," for p in sorted((ROOT / "kdtree_lab" / "core").glob("*.py")))
    code = (f"import sys, kdtree_lab.kernels.launch_plan, {budget} {core} kdtree_lab.kernels.abi; "
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
             "Q8_ROWS_ALIGN": plan, "q8_rows": plan,
             "D_QK": mla, "D_V": mla, "MODEL_SM_SCALE": mla, "KERNEL_DEFAULT_SM_SCALE": mla, "ABI_VERSION": abi,
             "KV_BF16": abi, "KV_CODES": abi, "FLAG_INDEX_OUT_OF_POOL": abi, "KdtConfig": abi, "declare": abi,
             "_declare": abi, "KV_DTYPES": dtypes, "kv_dtype_name": dtypes}
    pkg = ROOT / "kdtree_lab"
    for path in sorted(pkg.rglob("*.py")):
        where = path.relative_to(pkg).as_posix()
        for name in _defines(path) & set(homes):
            assert where == homes[name], f"{name} defined in {where}, its home is {homes[name]}"


def test_the_fp8_math_names_are_the_abis():
    from kdtree_lab.kernels import abi

    assert tuple(abi.FP8_MATH) == launch_plan.FP8_MATHS
