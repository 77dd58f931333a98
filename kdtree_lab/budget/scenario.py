"""The reference decision, reproduced: the deployment the package was built for (Kimi K2 int4 on 8 x RTX PRO 6000,
TP8, verify batch 8, 16 draft tokens, 200k context) ran at ``--mem-fraction-static`` 0.93-0.94 with CUDA graphs
disabled, then at 0.88 once graphs and the verify workspace came in. For each run: what every consumer takes,
the slack the fraction leaves, the KV tokens, whether it is safe under each activation estimate and why, and the
largest safe fraction under each; and the workspace the kernel really needs at batch 8, line by line, against
SGLang's own decode split-K buffers for the same rows and the ~605 MB figure quoted for a 16-split fp32 workspace
(whose source is not known: docs/memory.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..kernels.launch_plan import HEADER_BYTES, Q8_ROWS_ALIGN, plan, q8_rows
from ..core.mla import D_QK, D_V
from .calculator import BudgetResult, compute
from .inputs import GIB, BudgetInputs, mib
from .prefill_activations import ACTIVATION_MODELS
from .presets import gpus, models
from .sglang_memory import triton_graph_buffers

REFERENCE = BudgetInputs(gpu="rtx-pro-6000", model="kimi-k2", tp=8, quant="int4", max_bs=8, draft_tokens=16,
                         context=200_000, concurrency=8)
# (label, fraction, CUDA graphs, the kdtree verify kernel)
RUNS = (("0.93, CUDA graphs off, stock verify", 0.93, False, False),
        ("0.94, CUDA graphs off, stock verify", 0.94, False, False),
        ("0.88, CUDA graphs on, kdtree verify workspace", 0.88, True, True))
QUOTED_WORKSPACE_MB = 605  # the figure the decision quoted for a 16-split fp32 workspace at batch 8
# 605,028,352 B = 2^18 rows x (576 + 1) x fp32; the two readings of the rows (requests, nodes, heads, splits), neither
# settled by a source: SGLang's 256 splits at 8 local heads, or 16 splits at 128 heads (DeepSeek-V3's count)
QUOTED_READINGS = ((8, 16, 8, 256), (8, 16, 128, 16))
QUOTED_WIDTH = 576  # fp32 per partial row (plus one LSE); SGLang's partial rows are 512 wide


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
                      ("draft weights and multimodal reserve (inside the fraction)",
                       lambda r: r.draft_weights_bytes + r.reserve_bytes),
                      ("KV pool (inside the fraction)", lambda r: r.kv_pool_bytes),
                      ("slack the fraction leaves, G x (1 - fraction)", lambda r: int(r.g_bytes * (1 - r.fraction)))):
        rows.append({"consumer": label, **{run.label: mib(fn(run.result)) for run in scenario}})
    for m in ACTIVATION_MODELS:
        rows.append({"consumer": f"left in the slack, activations {m}",
                     **{run.label: mib(run.by_model[m].g_bytes * (1 - run.by_model[m].fraction)
                                       - run.by_model[m].slack_needed_bytes) for run in scenario}})
    return rows


def verdict_rows(scenario: list[ScenarioRun]) -> list[dict]:
    """Per run and activation estimate: safe or not (the server starts, its pool holds one request of the context
    and the slack holds its consumers) and why, the largest safe fraction, KV tokens."""
    rows = []
    for run in scenario:
        for m in ACTIVATION_MODELS:
            r = run.by_model[m]
            rows.append({"run": run.label, "activations": m + ("" if r.activation == m else f" ({r.activation})"),
                         "safe": r.fraction_is_safe,
                         "why": r.verdict().split(": ", 1)[1], "largest safe fraction": r.safe_fraction,
                         "KV tokens": r.kv_tokens,
                         f"tokens per request at {r.inputs.concurrency}": r.max_context_per_request})
    return rows


def workspace_lines(base: BudgetInputs = REFERENCE) -> list[dict]:
    """The verify workspace at batch ``base.max_bs``, line by line: what the SGLang hook allocates (the largest
    over batch 1..max_bs at the kernel's own split counts), the same layout at 16 splits, SGLang's own decode
    split-K buffers for the same tokens (``cuda_graph_attn_logits`` fp32 [bs x N, H, S, 512] and
    ``cuda_graph_attn_lse`` fp32 [bs x N, H, S]) and the quoted ~605 MB (2^18 rows x (576 + 1) x fp32, with both
    readings of its rows). Bytes."""
    g, m = gpus()[base.gpu], models()[base.model]
    heads, n, bs = m.heads // base.tp, base.draft_tokens, base.max_bs
    lp = plan(range(1, bs + 1), n, heads, base.kv_dtype, g.device)
    worst = max(lp.batches, key=lambda b: lp.batches[b].workspace_bytes)
    splits = lp.batches[worst].nsplit

    def block(name: str, items) -> list[dict]:
        out = [{"workspace": name, "line": a, "formula": f, "bytes": v} for a, f, v in items]
        out.append({"workspace": name, "line": "total", "formula": "", "bytes": sum(v for *_, v in items)})
        return out

    def layout(name: str, b: int, splits: int) -> list[dict]:
        rows = b * (splits + 1) * n * heads
        q8 = b * q8_rows(n * heads)
        return block(name, [("header (status word)", "256 B", HEADER_BYTES),
                            (f"partial outputs: {b} requests x ({splits} splits + 1 draft block) x {n} nodes x "
                             f"{heads} heads = {rows:,} rows", f"rows x {D_V} x fp32", rows * D_V * 4),
                            ("partial LSE", "rows x fp32, padded to 256 B", math.ceil(rows * 4 / 256) * 256),
                            (f"e4m3 Q pass: {b} requests x {q8 // b} rows ({n} x {heads} padded to {Q8_ROWS_ALIGN})",
                             f"rows x 2 x {D_QK} B", q8 * 2 * D_QK),
                            ("e4m3 Q pass scales", "rows x fp32, padded to 256 B", math.ceil(q8 * 4 / 256) * 256)])

    at_bs = lp.batches[bs]
    same = at_bs.workspace_bytes == lp.workspace_bytes
    why = "" if worst == bs else (
        f": batch {worst} at {splits} splits holds {'as many' if same else 'more'} partial rows as batch {bs} at "
        f"{at_bs.nsplit} (the split rule gives a smaller batch more splits), and one workspace serves every captured "
        "size")
    out = layout(f"what the hook allocates, the largest layout of batches 1..{bs} (batch {worst}, {splits} splits, "
                 f"{lp.batches[worst].config.name}; {g.label}){why}", worst, splits)
    assert out[-1]["bytes"] == lp.workspace_bytes
    out += layout(f"the same layout at 16 splits, batch {bs}", bs, 16)
    sg = {c.sglang: c for c in triton_graph_buffers(heads, bs, n, 1, 1, base.context, g.sms)}
    logits, lse = sg[(("target_verify", "cuda_graph_attn_logits"),)], sg[(("target_verify", "cuda_graph_attn_lse"),)]
    s = lse.bytes // (bs * n * heads * 4)
    out += block(f"SGLang's own decode split-K buffers for the same {bs * n} tokens (triton_backend.py "
                 "init_cuda_graph_state)",
                 [(f"cuda_graph_attn_logits: {bs} requests x {n} nodes x {heads} heads x {s} splits = "
                   f"{bs * n * heads * s:,} rows", f"rows x {D_V} (v_head_dim) x fp32", logits.bytes),
                  ("cuda_graph_attn_lse", "rows x fp32", lse.bytes)])
    rows = math.prod(QUOTED_READINGS[0])
    a, b = (" x ".join(map(str, r)) for r in QUOTED_READINGS)
    out += block(f"the quoted ~{QUOTED_WORKSPACE_MB} MB (source not found)",
                 [(f"partials: {rows:,} rows, read as {a} (requests x nodes x heads x splits) or as {b}",
                   f"rows x {QUOTED_WIDTH} x fp32", rows * QUOTED_WIDTH * 4),
                  ("LSE", "rows x fp32", rows * 4)])
    return out


def workspace_title(base: BudgetInputs = REFERENCE) -> str:
    """The heading of :func:`workspace_lines` (notebook 04 and ``kdtree-lab budget --preset reference-decision``)."""
    return (f"the verify workspace for batches 1..{base.max_bs} (one allocation, sized by the largest), line by line "
            "(bytes)")


def reference_decision(base: BudgetInputs = REFERENCE) -> dict:
    """The whole scenario as plain data (what the CLI prints and notebook 04 shows)."""
    scenario = runs(base)
    return {"deployment": base, "consumers": consumer_rows(scenario), "verdicts": verdict_rows(scenario),
            "workspace": workspace_lines(base), "workspace_title": workspace_title(base),
            "largest_safe_fraction": {m: scenario[-1].by_model[m].safe_fraction for m in ACTIVATION_MODELS},
            "largest_safe_fraction_without_graphs": {m: scenario[0].by_model[m].safe_fraction
                                                     for m in ACTIVATION_MODELS}}
