"""Audit a verify call's buffers against the SGLang contract before any kernel reads them.

``audit`` returns one row per buffer (expected vs found dtype, shape, strides, device) and one result per
invariant. With ``enforce=True`` it raises :class:`ContractError`, which lists every mismatch by name, expected
and found. The audit reads index values on the host, so it syncs: it refuses to run under CUDA graph capture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from ..core.dtypes import kv_cache_pool, kv_dtype_of
from .spec import VARIANTS, Contract, load_contract


@dataclass(frozen=True)
class WorkspaceSpec:
    """What a workspace was sized for: max batch, N draft tokens, H heads, split count."""

    max_bs: int
    num_draft: int
    num_heads: int
    nsplit: int


@dataclass
class AuditRow:
    name: str
    expected_dtype: str
    found_dtype: str
    expected_shape: str
    found_shape: str
    strides: str
    device: str
    ok: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class InvariantResult:
    name: str
    ok: bool
    detail: str


@dataclass
class AuditReport:
    variant: str
    rows: list[AuditRow]
    invariants: list[InvariantResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows) and all(i.ok for i in self.invariants)

    @property
    def verdict(self) -> str:
        bad = self.mismatches()
        return "PASS" if not bad else f"FAIL ({len(bad)} mismatch{'es' if len(bad) > 1 else ''})"

    def mismatches(self) -> list[str]:
        out = [f"{r.name}: {p}" for r in self.rows for p in r.problems]
        out += [f"invariant {i.name}: {i.detail}" for i in self.invariants if not i.ok]
        return out

    def table(self) -> str:
        """The rows and invariants as terminal tables (``display.aligned_table``), the verdict last."""
        from ..core.display import aligned_table

        rows = [{"buffer": r.name, "dtype expected": r.expected_dtype, "dtype found": r.found_dtype,
                 "shape expected": r.expected_shape, "shape found": r.found_shape, "strides": r.strides,
                 "device": r.device, "ok": "ok" if r.ok else "MISMATCH"} for r in self.rows]
        invariants = [{"invariant": i.name, "ok": "ok" if i.ok else "BAD", "detail": i.detail} for i in self.invariants]
        return "\n\n".join([aligned_table(rows), aligned_table(invariants),
                             f"verdict ({self.variant}): {self.verdict}"])


class ContractError(ValueError):
    """Raised by the enforcing audit; ``report`` holds the whole audit."""

    def __init__(self, report: AuditReport):
        self.report = report
        lines = "\n  ".join(report.mismatches())
        super().__init__(f"verify buffers break the SGLang contract ({report.variant} variant):\n  {lines}")


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _eval_dim(expr: Any, env: Mapping[str, Any]) -> int:
    if isinstance(expr, int):
        return expr
    return int(eval(str(expr), {"__builtins__": {}}, dict(env)))  # noqa: S307 - contract file expressions


def _kv_pool_check(buffers: Mapping[str, Any], kv_dtype: str | None) -> InvariantResult:
    """The KV pool against its declared dtype (SGLang's --kv-cache-dtype) and the scales an fp8 pool needs:
    k_buffer / v_buffer of one dtype, the declared one; for float8_e4m3fn, k_scale and v_scale finite and > 0."""
    kb, vb = buffers.get("k_buffer"), buffers.get("v_buffer")
    found = _dtype_name(kb) if isinstance(kb, torch.Tensor) else "None"
    pool = kv_dtype_of(kb.dtype) if isinstance(kb, torch.Tensor) else None
    fp8 = pool is not None and pool.name == "fp8"
    problems = []
    if kv_dtype is not None:
        want = kv_cache_pool(kv_dtype).torch_name
        if found != want:
            problems.append(f"k_buffer: declared {kv_dtype} (--kv-cache-dtype) expects {want}, found {found}")
    if isinstance(vb, torch.Tensor) and _dtype_name(vb) != found:
        problems.append(f"v_buffer: {_dtype_name(vb)}, expected k_buffer's dtype {found}")
    if fp8:
        for name in ("k_scale", "v_scale"):
            x = buffers.get(name)
            if not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
                problems.append(f"{name}: an fp8 pool needs a finite scale > 0 (SGLang: layer.{name}_float, "
                                f"else 1.0), found {x!r}")
    return InvariantResult("kv_pool_dtype", not problems, "; ".join(problems) or
                           f"{found} pool" + (f", scales k {buffers.get('k_scale')} v {buffers.get('v_scale')}"
                                              if fp8 else ""))


def audit(buffers: Mapping[str, Any], contract: Contract | None = None, variant: str = "eager",
          workspace: WorkspaceSpec | None = None, enforce: bool = False, kv_dtype: str | None = None) -> AuditReport:
    """Check ``buffers`` (name -> tensor/scalar, e.g. ``VerifyBatch.buffers()``) against ``contract``; ``kv_dtype``:
    the pool dtype the server declares (SGLang's --kv-cache-dtype: auto/bf16 or fp8_e4m3), None to not check it."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError("audit reads index values on the host (a sync) and cannot run under CUDA graph capture; "
                           "audit the buffers before capture or after replay")
    contract = contract or load_contract()
    rows: list[AuditRow] = []
    inv: list[InvariantResult] = []

    def get(name: str) -> Any:
        return buffers.get(name)

    # Symbols from the contract's anchors; host copies of the index arrays for invariants.
    env: dict[str, Any] = {}
    host: dict[str, list[int]] = {}
    try:
        env["bs"] = int(get("kv_indptr").shape[0]) - 1
        env["N"] = int(get("max_extend_len"))
        env["H"] = int(get("q").shape[1])
        env["P"] = int(get("k_buffer").shape[0])
    except (AttributeError, TypeError, IndexError) as exc:
        raise ValueError(f"cannot derive bs/N/H/P from kv_indptr, max_extend_len, q, k_buffer: {exc}") from exc
    for name in ("qo_indptr", "kv_indptr", "mask_indptr"):
        t = get(name)
        if isinstance(t, torch.Tensor) and t.dim() == 1:
            host[name] = t.detach().to("cpu", torch.int64).tolist()
    env["kv_indptr"] = host.get("kv_indptr", [0] * (env["bs"] + 1))
    env["mask_indptr"] = host.get("mask_indptr", [0] * (env["bs"] + 1))

    devices = set()
    for name, spec in contract.buffers.items():
        t = get(name)
        expected_dtype = " | ".join(spec.dtypes[variant])
        expected_shape = "[" + ", ".join(str(s) for s in spec.shape) + "]"
        if t is None:
            ok = spec.optional
            rows.append(AuditRow(name, expected_dtype, "None", expected_shape, "-", "-", "-", ok,
                                 [] if ok else ["missing (None) but required"]))
            continue
        if not isinstance(t, torch.Tensor):
            rows.append(AuditRow(name, expected_dtype, type(t).__name__, expected_shape, "-", "-", "-", False,
                                 [f"expected a tensor, found {type(t).__name__}"]))
            continue
        devices.add(str(t.device))
        problems = []
        found = _dtype_name(t)
        if found not in spec.dtypes[variant]:
            problems.append(f"dtype: expected {expected_dtype} ({variant}), found {found}")
        shape = list(t.shape)
        if len(spec.shape) == 1 and isinstance(spec.shape[0], str) and spec.shape[0].startswith(">="):
            need = _eval_dim(spec.shape[0][2:], env)
            if t.dim() != 1 or shape[0] < need:
                problems.append(f"shape: expected 1-D with at least {need} elements, found {shape}")
        else:
            want = [_eval_dim(s, env) for s in spec.shape]
            if shape != want:
                problems.append(f"shape: expected {want}, found {shape}")
        if spec.layout == "contiguous" and not t.is_contiguous():
            problems.append(f"layout: expected contiguous, found strides {tuple(t.stride())}")
        elif spec.layout == "last_dim_contiguous" and t.stride(-1) != 1:
            problems.append(f"layout: expected last dim contiguous, found strides {tuple(t.stride())}")
        elif spec.layout == "view_of_k_buffer":
            kb = get("k_buffer")
            if not isinstance(kb, torch.Tensor) or t.data_ptr() != kb.data_ptr():
                problems.append("layout: expected a view of k_buffer's memory (same data pointer), found a copy")
            if spec.strides and list(t.stride()) != list(spec.strides):
                problems.append(f"strides: expected {tuple(spec.strides)}, found {tuple(t.stride())}")
        rows.append(AuditRow(name, expected_dtype, found, expected_shape, str(shape), str(tuple(t.stride())),
                             str(t.device), not problems, problems))

    inv.append(InvariantResult("same_device", len(devices) <= 1, f"devices {sorted(devices)}"))
    inv.append(_kv_pool_check(buffers, kv_dtype))
    bs, n, p = env["bs"], env["N"], env["P"]
    qo = host.get("qo_indptr", [])
    q = get("q")
    t_rows = int(q.shape[0]) if isinstance(q, torch.Tensor) else -1
    steps = [qo[i + 1] - qo[i] for i in range(len(qo) - 1)]
    ok = len(qo) == bs + 1 and qo[:1] == [0] and all(s == n for s in steps) and qo[-1:] == [t_rows]
    inv.append(InvariantResult("qo_indptr_uniform", ok,
                               f"starts {qo[:1]}, steps {sorted(set(steps))} (expected {n}), ends {qo[-1:]} "
                               f"(expected q.shape[0]={t_rows}), length {len(qo)} (expected {bs + 1})"))
    kv = host.get("kv_indptr", [])
    lens = [kv[i + 1] - kv[i] for i in range(len(kv) - 1)]
    ok = kv[:1] == [0] and all(x >= 0 for x in lens)
    inv.append(InvariantResult("kv_indptr_monotone", ok, f"starts {kv[:1]}, smallest step {min(lens, default=0)}"))
    idx = get("kv_indices")
    valid = kv[-1] if kv else 0
    if isinstance(idx, torch.Tensor) and idx.dim() == 1:
        inv.append(InvariantResult("kv_indices_cover", idx.numel() >= valid,
                                   f"{idx.numel()} entries, kv_indptr[bs] = {valid}"))
        part = idx[:valid].detach().to("cpu", torch.int64)
        lo = int(part.min()) if part.numel() else 0
        hi = int(part.max()) if part.numel() else 0
        inv.append(InvariantResult("kv_indices_in_pool", part.numel() == 0 or (lo >= 0 and hi < p),
                                   f"valid slot ids in [{lo}, {hi}], pool rows P = {p}"))
    mi = host.get("mask_indptr", [])
    want_steps = [n * (length + n) for length in lens]
    got_steps = [mi[i + 1] - mi[i] for i in range(len(mi) - 1)]
    inv.append(InvariantResult("mask_indptr_layout", mi[:1] == [0] and got_steps == want_steps,
                               "steps match N*(L_b+N)" if got_steps == want_steps
                               else f"first step {got_steps[:1]}, expected {want_steps[:1]}"))
    mask = get("custom_mask")
    if isinstance(mask, torch.Tensor):
        need = mi[-1] if mi else 0
        inv.append(InvariantResult("mask_length", mask.numel() >= need, f"{mask.numel()} elements, need {need}"))
        if mask.numel() >= need and got_steps == want_steps:
            host_mask = mask[:need].detach().to("cpu")
            bad = []
            for b, length in enumerate(lens):
                block = host_mask[mi[b]: mi[b + 1]].view(n, length + n)[:, length:] != 0
                if not bool(block.diagonal().all()) or not bool(block[:, 0].all()):
                    bad.append(b)
            inv.append(InvariantResult("mask_self_visible", not bad,
                                       "every node sees itself and the root" if not bad
                                       else f"requests {bad[:8]} have a node that cannot see itself or the root"))
    if workspace is not None:
        problems = []
        if bs > workspace.max_bs:
            problems.append(f"bs {bs} > workspace max_bs {workspace.max_bs}")
        if n != workspace.num_draft:
            problems.append(f"N {n} != workspace N {workspace.num_draft}")
        if env["H"] != workspace.num_heads:
            problems.append(f"H {env['H']} != workspace H {workspace.num_heads}")
        inv.append(InvariantResult("within_workspace", not problems, "; ".join(problems) or
                                   f"bs {bs} <= {workspace.max_bs}, N {n}, H {env['H']}"))
    report = AuditReport(variant, rows, inv)
    if enforce and not report.ok:
        raise ContractError(report)
    return report
