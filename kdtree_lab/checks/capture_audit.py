"""Capture-safety audit: run a callable once and report what would break (or silently freeze) a CUDA graph.

Findings, each with the op and the first stack line outside torch and this module:

- ``host-sync``: ``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``bool(t)`` (seen at the Python level),
  data-dependent shapes (``nonzero``, ``masked_select``, ``unique``), ``torch.cuda.synchronize``; on a GPU,
  torch's sync debug mode reports the syncs too;
- ``allocation``: a tensor created inside the call (under capture it would come from the graph's private pool,
  with an address baked into the graph; SGLang's rule is persistent buffers only);
- ``stream``: an op launched on a stream other than the one current when the call started (kernels must launch
  on the capture stream);
- ``frozen-shape``: the shape of a watched buffer read in Python (e.g. ``kv_indices``: under graphs the buffer is
  far longer than its valid part, and the value read at capture is baked into the graph).

It works through ``TorchDispatchMode`` (ops) and a tensor subclass with ``__torch_function__`` (shape reads), so
it runs on a CPU too.
"""

from __future__ import annotations

import os
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_SYNC_METHODS = {"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__"}
_SYNC_OPS = {"aten.nonzero", "aten.masked_select", "aten._unique2", "aten.unique_dim",
             "aten.unique_consecutive", "aten.repeat_interleave", "aten.item"}
_FACTORY_PREFIXES = ("aten.empty", "aten.zeros", "aten.ones", "aten.full", "aten.rand", "aten.arange",
                     "aten.scalar_tensor", "aten.new_", "aten.empty_like", "aten.zeros_like", "aten.ones_like",
                     "aten.full_like", "aten.rand_like", "aten.randn_like")
_SHAPE_FUNCS = {"size", "shape", "numel", "__len__", "dim", "nelement"}
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


@dataclass(frozen=True)
class Finding:
    kind: str  # host-sync | allocation | stream | frozen-shape
    op: str
    where: str  # file:line of the first frame outside torch and this module
    detail: str = ""


@dataclass
class CaptureAuditReport:
    findings: list[Finding] = field(default_factory=list)

    @property
    def capture_safe(self) -> bool:
        return not self.findings

    def by_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def table(self) -> str:
        if not self.findings:
            return "capture-safe: no host syncs, allocations, foreign-stream launches or frozen shapes"
        return "\n".join(f"{f.kind:13s} {f.op:32s} {f.where}  {f.detail}" for f in self.findings)


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-1]):
        path = os.path.abspath(frame.filename)
        if path.startswith(_TORCH) or path.startswith(os.path.join(_HERE, "capture_audit.py")):
            continue
        if "contextlib" in path:
            continue
        return f"{os.path.relpath(path) if not path.startswith('<') else path}:{frame.lineno}"
    return "?"


class _AuditMode(TorchDispatchMode):
    def __init__(self, report: CaptureAuditReport, stream: Any, allow_alloc: Iterable[str] = ()):
        super().__init__()
        self.report, self.stream, self.allow_alloc = report, stream, set(allow_alloc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket) if hasattr(func, "overloadpacket") else str(func)
        name = "aten." + name.split(".")[-1] if name.startswith("aten") else name
        if name in _SYNC_OPS:
            self.report.findings.append(Finding("host-sync", name, _caller(), "reads device data on the host"))
        elif name in ("aten._to_copy", "aten.copy_", "aten.to"):
            dst = kwargs.get("device")
            srcs = [a for a in args if isinstance(a, torch.Tensor)]
            if dst is not None and torch.device(dst).type == "cpu" and any(s.device.type == "cuda" for s in srcs):
                self.report.findings.append(Finding("host-sync", name, _caller(), "copies a CUDA tensor to the CPU"))
        elif name.startswith(_FACTORY_PREFIXES) and name not in self.allow_alloc:
            self.report.findings.append(Finding("allocation", name, _caller(), "allocates inside the call"))
        if self.stream is not None and torch.cuda.current_stream() != self.stream:
            self.report.findings.append(Finding("stream", name, _caller(),
                                                f"launched on {torch.cuda.current_stream()}, not {self.stream}"))
        return func(*args, **kwargs)


class _SyncMethodMode(TorchFunctionMode):
    """Host reads at the Python level (``.item()``, ``.tolist()``, ``.cpu()``, ``bool(t)``, ...), on any device."""

    def __init__(self, report: CaptureAuditReport):
        super().__init__()
        self.report = report

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        # .to("cpu") spelled out, or any move of a CUDA tensor to the CPU (a device variable that happens to be
        # the CPU in a CPU-only audit is not counted).
        targets = [a for a in list(args[1:]) + [kwargs.get("device")] if isinstance(a, (str, torch.device))]
        src_cuda = bool(args) and isinstance(args[0], torch.Tensor) and args[0].is_cuda
        is_cpu_to = name == "to" and any((isinstance(a, str) and a.startswith("cpu")) or
                                         (src_cuda and torch.device(a).type == "cpu") for a in targets)
        if name in _SYNC_METHODS or is_cpu_to:
            self.report.findings.append(Finding("host-sync", f"Tensor.{name}", _caller(),
                                                "reads device data on the host"))
        return func(*args, **kwargs)


class WatchedTensor(torch.Tensor):
    """A tensor whose Python-side shape reads are recorded (see :func:`watch`)."""

    _audit_report: CaptureAuditReport | None = None
    _audit_name = "?"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fname = getattr(func, "__name__", str(func))
        if fname == "__get__":  # properties like .shape arrive as <attribute>.__get__
            fname = getattr(getattr(func, "__self__", None), "__name__", fname)
        if fname in _SHAPE_FUNCS and args and isinstance(args[0], WatchedTensor) and args[0]._audit_report:
            args[0]._audit_report.findings.append(
                Finding("frozen-shape", f"{args[0]._audit_name}.{fname}", _caller(),
                        "a Python value read from this buffer's shape is baked into a captured graph"))
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        return out  # results are plain tensors: only the named buffers are watched


def watch(t: torch.Tensor, name: str, report: CaptureAuditReport) -> torch.Tensor:
    """Wrap ``t`` so reads of its shape are reported as frozen values (the data is shared, not copied)."""
    w = t.as_subclass(WatchedTensor)
    w._audit_report, w._audit_name = report, name
    return w


@contextmanager
def _sync_debug():
    if not torch.cuda.is_available():
        yield
        return
    old = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(old)


def audit_capture(fn: Callable[..., Any], *args: Any, watch_shapes: dict[str, torch.Tensor] | None = None,
                  **kwargs: Any) -> CaptureAuditReport:
    """Run ``fn(*args, **kwargs)`` once under the audit and return the findings.

    ``watch_shapes`` maps names to tensors among the arguments (or reachable from them) whose Python shape reads
    are findings; pass the same objects the callable uses (use :func:`watch` to build them)."""
    report = CaptureAuditReport()
    if watch_shapes:
        for name, t in watch_shapes.items():
            if isinstance(t, WatchedTensor):
                t._audit_report, t._audit_name = report, name
    stream = torch.cuda.current_stream() if torch.cuda.is_available() else None
    import warnings

    with warnings.catch_warnings(record=True) as caught, _sync_debug():
        warnings.simplefilter("always")
        sync_calls = []
        original = torch.cuda.synchronize

        def traced_sync(*a, **k):
            sync_calls.append(_caller())
            return original(*a, **k)

        torch.cuda.synchronize = traced_sync
        try:
            with _SyncMethodMode(report), _AuditMode(report, stream):
                fn(*args, **kwargs)
        finally:
            torch.cuda.synchronize = original
    for where in sync_calls:
        report.findings.append(Finding("host-sync", "torch.cuda.synchronize", where, "blocks the host"))
    for w in caught:
        text = str(w.message).lower()
        if "synchronizing" in text and "prototype feature" not in text:  # not the mode's own disclaimer
            report.findings.append(Finding("host-sync", "sync debug mode", f"{w.filename}:{w.lineno}",
                                           str(w.message)[:120]))
    return report

