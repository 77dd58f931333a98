"""The reference decision, reproduced: the deployment the package was built for (Kimi K2 int4 on 8 x RTX PRO 6000,
TP8, verify batch 8, 16 draft tokens, 200k context) ran at ``--mem-fraction-static`` 0.93-0.94 with CUDA graphs
disabled, then at 0.88 once graphs and the verify workspace came in. For each run: what every consumer takes,
the slack the fraction leaves, the KV tokens, whether it is safe under each activation estimate and why, and the
largest safe fraction under each; and the workspace the kernel really needs at batch 8, line by line, against the
~605 MB figure quoted for it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..kernels.launch_plan import HEADER_BYTES, plan
from ..core.mla import D_V
from .calculator import BudgetResult, compute
from .inputs import GIB, BudgetInputs, mib
from .prefill_activations import ACTIVATION_MODELS
from .presets import gpus, models
from .sglang_memory import MLA_MAX_KV_SPLITS

REFERENCE = BudgetInputs(gpu="rtx-pro-6000", model="kimi-k2", tp=8, quant="int4", max_bs=8, draft_tokens=16,
                         context=200_000, concurrency=8)
# (label, fraction, CUDA graphs, the kdtree verify kernel)
RUNS = (("0.93, CUDA graphs off, stock verify", 0.93, False, False),
        ("0.94, CUDA graphs off, stock verify", 0.94, False, False),
        ("0.88, CUDA graphs on, kdtree verify workspace", 0.88, True, True))
QUOTED_WORKSPACE_MB = 605  # the figure the decision quoted for a split fp32 workspace at batch 8


@dataclass(frozen=True)
class ScenarioRun:
    label: str
    result: BudgetResult  # under the default activation model
    by_model: dict  # activation model -> BudgetResult at the same fraction


def runs(base: BudgetInputs = REFERENCE) -> list[ScenarioRun]:
    out = []
    for label, frac, graphs, kernel in RUNS:
        inp = replace(base, mem_fraction=frac, cuda_graphs=graphs, verify_kernel=kernel)
        by_model = {m: compute(replace(inp, activation_model=m)) for m in ACTIVATION_MODELS}
        out.append(ScenarioRun(label, by_model[base.activation_model], by_model))
    return out


def consumer_rows(scenario: list[ScenarioRun]) -> list[dict]:
    """Every consumer's MiB in each run (the activation line under each estimate on its own row), the slack each
    fraction leaves and what is left after the counted consumers."""
    names: list[str] = []
    for run in scenario:
        for r in run.by_model.values():
            for c in r.consumers:
                if c.name not in names and c.where != "pool":
                    names.append(c.name)
    rows = []
    for name in names:
        row = {"consumer": name}
        for run in scenario:
            got = [c for r in run.by_model.values() for c in r.consumers if c.name == name]
            row[run.label] = mib(got[0].bytes) if got else "-"
        rows.append(row)
    for label, fn in (("weights (inside the fraction)", lambda r: r.weights_bytes),
                      ("KV pool (inside the fraction)", lambda r: r.kv_pool_bytes),
                      ("slack the fraction leaves, G x (1 - fraction)", lambda r: int(r.g_bytes * (1 - r.fraction)))):
        rows.append({"consumer": label, **{run.label: mib(fn(run.result)) for run in scenario}})
    for m in ACTIVATION_MODELS:
        rows.append({"consumer": f"left in the slack, activations {m}",
                     **{run.label: mib(run.by_model[m].g_bytes * (1 - run.by_model[m].fraction)
                                       - run.by_model[m].slack_needed_bytes) for run in scenario}})
    return rows


def verdict_rows(scenario: list[ScenarioRun]) -> list[dict]:
    """Per run and activation estimate: slack, need, safe or not and why, the largest safe fraction, KV tokens."""
    rows = []
    for run in scenario:
        for m in ACTIVATION_MODELS:
            r = run.by_model[m]
            rows.append({"run": run.label, "activations": m + ("" if r.activation == m else f" ({r.activation})"),
                         "safe": r.g_bytes * (1 - r.fraction) >= r.slack_needed_bytes,
                         "why": r.verdict().split(": ", 1)[1], "largest safe fraction": r.safe_fraction,
                         "KV tokens": r.kv_tokens,
                         f"tokens per request at {r.inputs.concurrency}": r.max_context_per_request})
    return rows


def workspace_lines(base: BudgetInputs = REFERENCE) -> list[dict]:
    """The verify workspace at batch ``base.max_bs``, line by line: what the SGLang hook allocates (the largest
    over batch 1..max_bs at the kernel's own split counts), the same layout at 16 splits, and the parameters that
    give the quoted ~605 MB (SGLang's 256 decode splits of a 576-wide fp32 row plus its LSE)."""
    g, m = gpus()[base.gpu], models()[base.model]
    heads, n, bs = m.heads // base.tp, base.draft_tokens, base.max_bs
    lp = plan(range(1, bs + 1), n, heads, base.kv_dtype, g.device)
    worst = max(lp.batches, key=lambda b: lp.batches[b].workspace_bytes)
    splits = lp.batches[worst].nsplit

    def layout(name: str, b: int, splits: int) -> list[dict]:
        rows = b * (splits + 1) * n * heads
        items = [("header (status word)", "256 B", HEADER_BYTES),
                 (f"partial outputs: {b} requests x ({splits} splits + 1 draft block) x {n} nodes x {heads} heads "
                  f"= {rows} rows", f"rows x {D_V} x fp32", rows * D_V * 4),
                 ("partial LSE", "rows x fp32, padded to 256 B", math.ceil(rows * 4 / 256) * 256)]
        out = [{"workspace": name, "line": a, "formula": f, "bytes": v} for a, f, v in items]
        out.append({"workspace": name, "line": "total", "formula": "", "bytes": sum(v for *_, v in items)})
        return out

    out = layout(f"what the hook allocates (batch {worst}, {splits} splits, {lp.batches[worst].config.name}; "
                 f"{g.label})", worst, splits)
    assert out[-1]["bytes"] == lp.workspace_bytes
    out += layout("the same layout at 16 splits, batch 8", bs, 16)
    rows = bs * n * heads * MLA_MAX_KV_SPLITS
    quoted = [("partials: 8 requests x 16 nodes x 8 heads x 256 splits", "rows x 576 x fp32", rows * 576 * 4),
              ("LSE", "rows x fp32", rows * 4)]
    out += [{"workspace": f"the quoted ~{QUOTED_WORKSPACE_MB} MB", "line": a, "formula": f, "bytes": v}
            for a, f, v in quoted]
    out.append({"workspace": f"the quoted ~{QUOTED_WORKSPACE_MB} MB", "line": "total", "formula": "",
                "bytes": sum(v for *_, v in quoted)})
    return out


def reference_decision(base: BudgetInputs = REFERENCE) -> dict:
    """The whole scenario as plain data (what the CLI prints and notebook 04 shows)."""
    scenario = runs(base)
    return {"deployment": base, "consumers": consumer_rows(scenario), "verdicts": verdict_rows(scenario),
            "workspace": workspace_lines(base),
            "largest_safe_fraction": {m: scenario[-1].by_model[m].safe_fraction for m in ACTIVATION_MODELS},
            "largest_safe_fraction_without_graphs": {m: scenario[0].by_model[m].safe_fraction
                                                     for m in ACTIVATION_MODELS}}
