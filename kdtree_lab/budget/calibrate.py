"""Estimates replaced by measurements: SGLang's start-up log, and the kernel's own workspace and graph pool as
notebook 05 measured them against what the launch plan predicts."""

from __future__ import annotations

import re
from dataclasses import replace

from ..contract.spec import sglang_capture_sizes
from ..kernels.launch_plan import Config, Device, fixed, plan
from .inputs import GIB, MIB, BudgetInputs

_LOG_PATTERNS = {
    "after_weights_avail": r"Load weight end.*?avail mem=([\d.]+) GB",
    "kv_tokens": r"KV Cache is allocated\..*?#tokens: (\d+)",
    "after_pool_avail": r"Memory pool end.*?avail mem=([\d.]+) GB",
    "graph_pool": r"Capture cuda graph end.*?mem usage=([\d.]+) GB",
}
# SGLang 0.5.23 logs G's reading as "Load weight begin. avail mem=" (distributed/bootstrap.py takes the MIN over
# ranks); older releases logged "Memory baseline taken. avail mem=". The target loads first, then the draft: each
# rank's first "Load weight end ... mem usage" is the target's, a second one the draft's.
_G = re.compile(r"(?:Load weight begin\.|Memory baseline taken\.).*?avail mem=([\d.]+) GB")
_WEIGHTS = re.compile(r"Load weight end.*?mem usage=([\d.]+) GB")
_RANK = re.compile(r"\bTP(\d+)\]")


LOG_LINES = ("Load weight begin", "Load weight end", "KV Cache is allocated", "Capture cuda graph end")
# SGLang's logger prefixes its lines with "[YYYY-mm-dd HH:MM:SS TP0]" (date, time, rank); its launcher's own lines
# name sglang.
_SGLANG_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}[ \]]|\bTP\d+\]|sglang", re.M)


def is_sglang_log(text: str) -> bool:
    """Whether ``text`` has at least one line in SGLang's log format (a foreign file has none)."""
    return bool(_SGLANG_LINE.search(text))


def _by_rank(pattern: re.Pattern, text: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for line in text.splitlines():
        m = pattern.search(line)
        if m:
            r = _RANK.search(line)
            out.setdefault(int(r.group(1)) if r else 0, []).append(float(m.group(1)))
    return out


def parse_sglang_log(text: str) -> dict[str, float]:
    """Calibration numbers from SGLang's start-up log (bytes; kv_tokens in tokens). G: the smallest first
    G reading over the ranks (as SGLang takes it); weights: the lowest rank's first "Load weight end" usage;
    draft_weights: the same rank's later ones. Missing lines are left out."""
    out: dict[str, float] = {}
    g = _by_rank(_G, text)
    if g:
        out["G"] = min(v[0] for v in g.values()) * GIB
    w = _by_rank(_WEIGHTS, text)
    if w:
        first = w[min(w)]
        out["weights"] = first[0] * GIB
        if len(first) > 1:
            out["draft_weights"] = sum(first[1:]) * GIB
    for key, pattern in _LOG_PATTERNS.items():
        found = re.findall(pattern, text)
        if found:
            value = float(found[-1])
            out[key] = value if key == "kv_tokens" else value * GIB
    return out


def calibrate(inp: BudgetInputs, measured: dict[str, float]) -> BudgetInputs:
    """Replace estimates by measurements (keys: G, weights, draft_weights, workspace, graph_pool; bytes)."""
    keep = {k: v for k, v in measured.items() if k in ("G", "weights", "draft_weights", "workspace", "graph_pool")}
    return replace(inp, measured={**inp.measured, **keep})


def predicted_kernel_graph_memory(max_bs: int, draft_tokens: int, heads: int, sms: int, block_m: int = 64) -> dict:
    """What the graph notebook should measure for the kernel alone: the workspace the graph runner allocates (the
    largest over SGLang's capture sizes with the default split count) and the graph pool, which the kernel does not
    add to beyond one 2 MiB allocator segment (it allocates nothing during capture). Bytes."""
    recorded = fixed(Config(f"the configuration of {block_m}-row tiles the run recorded", block_m))
    ws = plan(sglang_capture_sizes(max_bs), draft_tokens, heads, "bf16", Device(sms, 0, 0),
              select=recorded).workspace_bytes
    return {"workspace": ws, "graph_pool": 2 * MIB}


def calibration_rows(graph_results: dict) -> list[dict]:
    """Predicted vs measured workspace and graph-pool bytes for the kernel-only graphs of notebook 05's results
    (``05_cuda_graphs.json``); ratio = measured / predicted. The SM count and row tile come from the results
    (files written before they were recorded ran on the 132-SM H200 with 64-row tiles: data/results/h200). The
    committed run predates the e4m3 Q pass's rows in the workspace (2026-12-05): its workspace ratio is 0.955."""
    measured = graph_results["enablement"]
    cfg = measured["config"]
    predicted = predicted_kernel_graph_memory(cfg["max_bs"], cfg["num_draft"], cfg["num_heads"],
                                              sms=measured.get("sms", 132), block_m=measured.get("block_m", 64))
    return [{"quantity": k, "predicted": predicted[k], "measured": measured[m],
             "ratio": round(measured[m] / predicted[k], 3)}
            for k, m in (("workspace", "workspace_bytes"), ("graph_pool", "graph_pool_bytes_total"))]
