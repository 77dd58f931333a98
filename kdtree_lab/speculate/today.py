"""Today's best on the reference deployment, as a model: vLLM's TRITON_MLA decode with full CUDA graphs verifying
an EAGLE-3 chain of 4 as decode rows, and the same deployment without speculation (times in ms).

The step's parts (``step.step`` with ``today`` set), each a physical quantity with its source
(``data/presets/speculation.yaml`` ``today``; docs/speculation.md, "Today's best"):

- attention, ``DecodeKernel``: vLLM's Triton decode as the deployment launches it. Each of the R = B x N query rows
  is its own request over a duplicated block-table row (the KV is read once per row); stage 1 runs
  R x ceil(H / BLOCK_H) x S CTAs, S the split count vLLM picks for R rows (64 for 1 to 8 rows), each streaming
  ceil(L / S) tokens at a per-CTA rate, one CTA per SM, so a call takes ceil(CTAs / SMs) waves of one CTA's
  time; never less than the distinct KV bytes at the weight bandwidth; plus the split partials stage 1 writes
  and stage 2 reads ((512 + 1) fp32 per row, head and split);
- weights: the roofline of ``step.weight_parts`` with the routed experts at ``moe_efficiency`` of the bandwidth
  (the fused Marlin MoE at a few tokens); experts touched by T tokens under top-8 of 384, independent routing;
- the draft: per forward a fixed cost plus its one MLA layer's decode over the context (a chain of N nodes: N - 1
  forwards);
- a fixed part per step (kernel gaps inside the graph, sampling, scheduling);
- decode context parallel (DCP d > 1): each GPU of the group holds 1/d of the tokens' KV and decodes the group's
  d x H heads over it (the queries gathered, the partial outputs merged by their LSE), the same launch rule, at a
  second fitted per-CTA rate where the shipped tuning table has that head count (16 and 64: DCP 2 and 8); the
  gather and merge cost a fitted time per step and doubling of the group.

Seven values are fitted (``fit``: least squares over the published cells of ``role: today``, relative step time):
the fixed part, the MoE efficiency, the per-CTA streaming rates (fallback and tuned launch), the draft's fixed cost
(one for today's K2.6 drafts with greedy draft sampling, one for the older K2.5 draft with probabilistic rejection that
only the v2 table measured: a table's ``draft_fit`` names its value) and DCP's gather and merge;
the YAML pins them and tests hold the pins to the fit. ``cells`` is the model against every published cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .presets import DecodeKernelPreset, Published, TodayPreset, published, today as today_presets
from .step import Part, StepInputError, Target, step

FITTED = ("fixed_ms", "moe_efficiency", "cta_gbps", "draft_ms", "dcp_ms", "tuned_gbps", "draft_ms_k25")  # ``fit`` sets


@dataclass(frozen=True)
class Call:
    """One decode call per layer: its time (ms) and how it was reached."""

    ms: float
    rows: int
    splits: int
    ctas: int
    waves: int
    stream_ms: float  # waves x one CTA's tokens at the per-CTA rate
    dram_ms: float  # the distinct KV bytes at the weight bandwidth
    partial_ms: float  # the split partials written and read


@dataclass(frozen=True)
class DecodeKernel:
    """vLLM's TRITON_MLA decode on one GPU: the launch (``preset``), the per-CTA streaming rate (GB/s), the GPU's
    SMs and bandwidth (GB/s)."""

    preset: DecodeKernelPreset
    cta_gbps: float
    sms: int
    bandwidth_gbps: float
    tuned_gbps: float = 0.0  # the per-CTA rate at a head count the shipped tuning table has (DCP 2: 16, DCP 8: 64)

    def rate(self, heads: int) -> float:
        """The per-CTA streaming rate (GB/s) at ``heads`` heads per GPU: the tuned rate where the tuning table has
        the count, else the fallback launch's."""
        return self.tuned_gbps if heads in self.preset.tuned_heads and self.tuned_gbps else self.cta_gbps

    def splits(self, rows: int, heads: int) -> int:
        """vLLM's split count for ``rows`` query rows of ``heads`` heads: the largest power of 2 at most
        ``cta_target`` / (rows x head blocks), capped at ``max_splits``."""
        k = self.preset
        target = max(1, k.cta_target // (rows * math.ceil(heads / k.block_h)))
        return min(k.max_splits, 1 << (target.bit_length() - 1))

    def call(self, rows: int, context: float, heads: int, distinct: int) -> Call:
        """A call of ``rows`` query rows over ``context`` tokens each, ``distinct`` of them over KV of their own
        (the rest duplicate a row's KV: speculative rows of one request)."""
        if rows < 1 or distinct < 1 or distinct > rows:
            raise StepInputError(f"rows, distinct: expected 1 <= distinct <= rows, found {rows}, {distinct}")
        k = self.preset
        s = self.splits(rows, heads)
        ctas = rows * math.ceil(heads / k.block_h) * s
        waves = math.ceil(ctas / (self.sms * k.ctas_per_sm))
        per_cta = math.ceil(math.ceil(max(context, 1) / s) / k.block_n) * k.block_n  # tokens, whole BLOCK_N tiles
        stream = waves * per_cta * k.kv_bytes_per_token / (self.rate(heads) * 1e9) * 1e3
        dram = distinct * context * k.kv_bytes_per_token / (self.bandwidth_gbps * 1e9) * 1e3
        partial = 2 * rows * heads * s * k.partial_bytes / (self.bandwidth_gbps * 1e9) * 1e3
        return Call(max(stream, dram) + partial, rows, s, ctas, waves, stream, dram, partial)


@dataclass(frozen=True)
class Today:
    """Today's best on one deployment, ready for ``step.step``: the decode kernel, the fixed part, the MoE
    efficiency, the draft's fixed cost per forward (ms) and the DCP size."""

    preset: TodayPreset
    kernel: DecodeKernel
    fixed: Part
    moe_efficiency: float
    draft_per_forward_ms: float
    layers: int
    heads: int
    draft_layers: int = 1  # the EAGLE-3 MLA draft: one decoder layer
    dcp: int = 1  # decode context parallel: the KV split over this many GPUs

    def _call(self, rows: int, context: float, distinct: int) -> Call:
        """One GPU's decode call: under DCP d, 1/d of the context for d x the heads."""
        return self.kernel.call(rows, context / self.dcp, self.heads * self.dcp, distinct)

    def attention(self, batch: int, nodes: int, context: float) -> Part:
        """Decode attention of one step over every layer: ``batch`` requests of ``nodes`` rows each (with DCP's
        gather and merge)."""
        c = self._call(batch * nodes, context, batch)
        how = "no speculation" if nodes == 1 else f"{nodes}-token verify as {batch * nodes} decode rows"
        dcp = self.preset.dcp_ms * math.log2(self.dcp)
        return Part(f"attention (vLLM decode, {how}{f', DCP {self.dcp}' if self.dcp > 1 else ''})",
                    self.layers * c.ms + dcp,
                    f"{self.layers} x {c.ms:.4f} ms: {c.ctas} CTAs ({c.rows} rows x {c.splits} splits) in {c.waves} "
                    f"wave(s) of ceil(L / {self.dcp * c.splits}) tokens at {self.kernel.rate(self.heads * self.dcp):g} GB/s per CTA "
                    f"({self.preset.sources['kernel'].split(':')[0]}), partials {c.partial_ms * 1e3:.1f} us"
                    + (f"; DCP {self.dcp}'s query gather and LSE merge {dcp:.2f} ms per step (fit: "
                       f"{self.preset.dcp_ms:g} ms x log2 {self.dcp})" if dcp else ""))

    def draft(self, forwards: int, context: float, what: str = "") -> Part:
        """The EAGLE-3 draft's cost for ``forwards`` forwards at ``context``: a fixed cost each plus its layer's
        one-row decode."""
        att = self.draft_layers * self._call(1, context, 1).ms
        return Part("draft", forwards * (self.draft_per_forward_ms + att),
                    f"{forwards} EAGLE-3 forwards{what} x ({self.draft_per_forward_ms:.3f} ms fixed (fit: "
                    f"{self.preset.draft_ms:g} ms per {self.preset.nodes - 1} forwards) + {att:.3f} ms of its MLA layer's "
                    "decode over the context)")


def preset_for(gpu: str, model: str, tp: int, quant: str) -> TodayPreset | None:
    """The today preset of this deployment, None when none was measured."""
    for p in today_presets().values():
        if (p.gpu, p.model, p.tp, p.quant) == (gpu, model, tp, quant):
            return p
    return None


def build(t: Target, preset: TodayPreset, dcp: int = 1, **values: float) -> Today:
    """The ``Today`` of target ``t`` from ``preset`` at DCP size ``dcp``, with any of the ``FITTED`` values
    replaced by ``values``."""
    p = replace(preset, **values)
    kernel = DecodeKernel(p.kernel, p.cta_gbps, t.gpu.sms, t.weights_gbps, p.tuned_gbps)
    fixed = Part("fixed per step", p.fixed_ms, f"{p.sources['fixed_ms']} ({p.fixed_ms:g} ms)")
    return Today(p, kernel, fixed, p.moe_efficiency, p.draft_ms / (p.nodes - 1), t.model.layers, t.heads, dcp=dcp)


def today_of(pub: Published, today: Today) -> Today:
    """``today`` (the deployment's, at DCP 1 with today's draft) as published table ``pub`` ran it: at the table's
    DCP size, its draft priced by the fitted value its ``draft_fit`` names (an older draft generation its own). The
    one home of a table's ``Today``: the residuals (``cells``) and the modelled lines (``published``) both use it."""
    p = today.preset
    at = replace(today, dcp=pub.dcp)
    if pub.draft_fit != "draft_ms":  # an older draft generation: its own fitted draft cost per step
        d = getattr(p, pub.draft_fit)
        at = replace(at, preset=replace(p, draft_ms=d), draft_per_forward_ms=d / (p.nodes - 1))
    return at


@dataclass(frozen=True)
class Cell:
    """One published cell and the model's step for it: ``series`` "no_spec" (``concurrency`` requests) or "spec"
    (one request, the chain of ``nodes``); ``measured_ms`` the step the cell implies (requests or tokens per step /
    tok/s); ``model`` the modelled step."""

    table: str
    dcp: int
    series: str
    context: int
    concurrency: int
    measured_tok_s: float
    measured_ms: float
    model_ms: float
    model_tok_s: float
    parts: tuple[Part, ...]

    @property
    def residual(self) -> float:
        """model / measured - 1 in tokens per second."""
        return self.model_tok_s / self.measured_tok_s - 1


def _cells(tables_of: list[Published]) -> list[tuple[str, str, int, int, float]]:
    """(table, series, context, concurrency, tok/s) of every cell: one-request rows, then the concurrency > 1
    columns (a cell the table left empty, null, skipped)."""
    out = []
    for p in tables_of:
        out += [(p.name, "no_spec", int(r[0]), 1, float(r[1])) for r in p.no_spec]
        out += [(p.name, "spec", int(r[0]), 1, float(r[1])) for r in p.spec]
        for r in p.concurrency_no_spec:
            out += [(p.name, "no_spec", int(r[0]), c, float(x)) for c, x in zip(p.concurrency, r[1:])
                    if c > 1 and x is not None]
    return out


def _model(t: Target, tables, today: Today, tokens: float, cell: tuple) -> tuple[float, tuple[Part, ...]]:
    name, series, context, conc, _ = cell
    ctx = max(context, 1)  # context 0: a prompt of a few tokens
    if series == "no_spec":
        st = step(t, tables, ctx, conc, today.fixed, today=today)
    else:
        n = today.preset.nodes
        st = step(t, tables, ctx, conc, today.fixed, "decode rows", n, tokens, today.draft(n - 1, ctx), "chain",
                  today=today)
    return st.ms, st.parts


def cells(t: Target, tables, today: Today, tokens: float, roles: tuple[str, ...] = ("today",)) -> list[Cell]:
    """Every published cell of tables of ``roles`` for this deployment against the model; ``tokens`` the chain's
    tokens per step."""
    p = today.preset
    pubs = [x for x in published().values() if x.role in roles and (x.gpu, x.model, x.tp, x.quant) ==
            (p.gpu, p.model, p.tp, p.quant)]
    out = []
    for pub in pubs:
        at = today_of(pub, today)
        for cell in _cells([pub]):
            name, series, context, conc, tok_s = cell
            per = conc if series == "no_spec" else tokens
            ms, parts = _model(t, tables, at, tokens, cell)
            out.append(Cell(name, pub.dcp, series, context, conc, tok_s, 1e3 * per / tok_s, ms, 1e3 * per / ms,
                            parts))
    return out


@dataclass(frozen=True)
class Fit:
    """The least-squares values of ``FITTED`` and the cells at them."""

    values: dict[str, float]
    cells: tuple[Cell, ...]


def fit(t: Target, tables, preset: TodayPreset, tokens: float, iterations: int = 4) -> Fit:
    """The ``FITTED`` values that minimise the squared relative error of the modelled step over the published
    cells of ``role: today`` (Gauss-Newton on (fixed, 1 / efficiency, 1 / rate, draft, DCP, 1 / tuned rate), in which the model is
    affine but for the max() of streaming and DRAM bounds)."""
    p = np.array([preset.fixed_ms, 1 / preset.moe_efficiency, 1 / preset.cta_gbps, preset.draft_ms, preset.dcp_ms,
                  1 / preset.tuned_gbps, preset.draft_ms_k25])

    def values(q: np.ndarray) -> dict[str, float]:
        return {"fixed_ms": float(q[0]), "moe_efficiency": float(1 / q[1]), "cta_gbps": float(1 / q[2]),
                "draft_ms": float(q[3]), "dcp_ms": float(q[4]), "tuned_gbps": float(1 / q[5]),
                "draft_ms_k25": float(q[6])}

    def model(q: np.ndarray) -> np.ndarray:
        return np.array([c.model_ms for c in cells(t, tables, build(t, preset, **values(q)), tokens)])

    measured = np.array([c.measured_ms for c in cells(t, tables, build(t, preset), tokens)])
    for _ in range(iterations):
        m0 = model(p)
        steps = np.maximum(np.abs(p) * 1e-3, 1e-9)
        n = len(p)
        jac = np.stack([(model(p + np.eye(n)[i] * steps[i]) - m0) / steps[i] for i in range(n)], axis=1)
        w = 1 / measured
        delta, *_ = np.linalg.lstsq(jac * w[:, None], (measured - m0) * w, rcond=None)
        p = p + delta
    v = values(p)
    return Fit(v, tuple(cells(t, tables, build(t, preset, **v), tokens)))
