"""What an sm_120 card (RTX PRO 6000, RTX 5090) should take for a kernel timed on the H200: a bound model, a
prediction (no card has been lent).

card time (ms) = floor + max(bytes, tensor, issue), with

- bytes: the call's DRAM bytes at the rate a streaming kernel reaches on the card (``Card.stream_gbps``, measured
  by a public source);
- tensor: the call's tensor-core FLOPs as the kernel issues them (row tiles padded) at the card's sustained rate,
  SMs x FLOP per clock per SM x the SM clock the card holds under tensor load (published measurements, not the
  boost clock), bf16 mma.sync (m16n8k16, fp32 accumulate) and e4m3 mma.sync (m16n8k32, fp32 accumulate, the
  block-scaled form sm_120a builds issue) separately;
- issue: the H200's time beyond the floor, which Nsight Compute shows is instruction issue and latency, not bytes
  or the MMA rate (docs/results.md, "The card model"), scaled by (SMs x sustained clock) of the H200 over the
  card's: the same instruction stream over more SMs at another clock. A kernel whose grid does not follow the SM
  count (SGLang's extend: B x H x ceil(N/32) CTAs, one per SM) gains from more SMs only through fewer waves:
  clock ratio x waves on the card / waves on the H200;
- floor: what a call costs however small, which does not scale with SMs: the replay of a graph of two dependent
  one-element kernels, measured on the H200 (the median of every committed ``scripts/fixed_cost.py`` run), for a
  call timed alone; 0 for a call timed in a back-to-back loop.

Every input is in ``data/presets/gpus.yaml`` (``card_model:``) with its source; ``data/published/sm120_checks.yaml``
holds the model against every published sm_120 measurement of a kernel that also runs on Hopper
(``card_checks``), and ``error_band`` the spread of those checks, which speculation's band carries.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache

import yaml

from ..core.mla import D_QK, D_V
from ..core.paths import DATA, RESULTS, ROOT

TENSOR_KINDS = ("bf16", "e4m3")
BOUNDS = ("bytes", "tensor", "issue")
REFERENCE = "h200"  # the GPU every committed grid ran on


class CardModelError(ValueError):
    """An input the card model cannot use; the message names it."""


@dataclass(frozen=True)
class Card:
    """One GPU's inputs to the model (``gpus.yaml`` ``card_model:``), each with its source."""

    name: str
    label: str
    sms: int
    sustained_mhz: float  # SM clock held under tensor load
    stream_gbps: float  # DRAM rate a streaming kernel reaches (GB/s)
    flop_per_clock_sm: dict[str, int]  # tensor FLOPs per clock per SM by kind (TENSOR_KINDS), fp32 accumulate
    sources: dict[str, str] = field(repr=False)

    def tensor_tflops(self, kind: str = "bf16") -> float:
        """The sustained tensor rate (TFLOP/s) of ``kind`` MMAs."""
        if kind not in self.flop_per_clock_sm:
            raise CardModelError(f"kind: expected one of {', '.join(self.flop_per_clock_sm)}, found {kind!r}")
        return self.sms * self.flop_per_clock_sm[kind] * self.sustained_mhz * 1e6 / 1e12

    @property
    def sm_ghz(self) -> float:
        """SMs x sustained clock (SM-GHz): the issue throughput the issue term scales by."""
        return self.sms * self.sustained_mhz / 1e3


@dataclass(frozen=True)
class Work:
    """What one call does: DRAM bytes, tensor FLOPs as issued (padded tiles) and the MMA kind they run on."""

    kv_bytes: float
    flops: float
    kind: str = "bf16"
    ctas: int | None = None  # CTAs of a grid fixed by the shape (one per SM); None: the grid follows the SM count


@dataclass(frozen=True)
class Prediction:
    """A card time (ms) and its terms; ``bound`` names the largest."""

    ms: float
    floor_ms: float
    bytes_ms: float
    tensor_ms: float
    issue_ms: float

    @property
    def bound(self) -> str:
        terms = dict(zip(BOUNDS, (self.bytes_ms, self.tensor_ms, self.issue_ms)))
        return max(terms, key=terms.get)


@lru_cache(maxsize=None)
def _section() -> dict:
    data = yaml.safe_load((DATA / "presets" / "gpus.yaml").read_text())
    if "card_model" not in data:
        raise CardModelError("data/presets/gpus.yaml: no card_model section")
    return data["card_model"]


def _card(name: str, v: dict) -> Card:
    from ..budget.presets import gpus

    g = gpus()[name]
    kinds = {k: int(v[f"{k}_flop_per_clock_sm"]) for k in TENSOR_KINDS if f"{k}_flop_per_clock_sm" in v}
    return Card(name, g.label, g.sms, float(v["sustained_mhz"]), float(v.get("stream_gbps", math.nan)), kinds,
                dict(v["sources"]) | {"sms": g.sources["sms"]})


def cards() -> dict[str, Card]:
    """The cards the model predicts for (every ``card_model`` entry but the reference), by preset name."""
    return {k: _card(k, v) for k, v in _section().items() if k != REFERENCE}


def reference() -> Card:
    """The GPU the H200 rows ran on, with its sustained clock under our kernels' load (its stream rate is each
    run's own copy ceiling)."""
    return _card(REFERENCE, _section()[REFERENCE])


def card(name: str) -> Card:
    """One card by preset name; CardModelError naming the known ones otherwise."""
    known = cards()
    if name not in known:
        raise CardModelError(f"gpu: expected one of {', '.join(sorted(known))} (gpus.yaml card_model), found {name!r}")
    return known[name]


@lru_cache(maxsize=None)
def floor() -> tuple[float, tuple[str, ...]]:
    """(ms, sources): the median over every committed ``scripts/fixed_cost.py`` run of its graph of two dependent
    one-element kernels, timed as every grid row is (a graph replay of one call): what a call costs however small."""
    found = []
    for path in sorted((RESULTS / REFERENCE).rglob("fixed-cost*.json")):
        data = json.loads(path.read_text())
        if "two_kernel_floor_ms" in data:
            found.append((data["two_kernel_floor_ms"], str(path.relative_to(ROOT))))
    if not found:
        raise CardModelError(f"floor: no committed fixed-cost run under data/results/{REFERENCE}/ holds "
                             "two_kernel_floor_ms")
    return statistics.median(ms for ms, _ in found), tuple(src for _, src in found)


def issue_scale(target: Card, ref: Card | None = None, ctas: int | None = None) -> float:
    """What an issue-bound H200 time is multiplied by on ``target``: (SMs x sustained clock) of the reference over
    the card's, or for a grid of ``ctas`` CTAs fixed by the shape (one per SM), the clock ratio times the waves on
    the card over the waves on the reference."""
    ref = ref or reference()
    if ctas is None:
        return ref.sm_ghz / target.sm_ghz
    waves = math.ceil(ctas / target.sms) / math.ceil(ctas / ref.sms)
    return ref.sustained_mhz / target.sustained_mhz * waves


def predict(h200_ms: float, work: Work, target: Card, floor_ms: float | None = None,
            h200_floor_ms: float | None = None, ref: Card | None = None) -> Prediction:
    """The card time of a call the H200 ran in ``h200_ms`` (ms) doing ``work``. ``h200_floor_ms``: the floor inside
    the H200 time (default ``floor()``, the grid's timing); ``floor_ms``: the floor the card's call carries (default
    the same; 0 for a call timed in a back-to-back loop)."""
    base = floor()[0]
    h200_floor = base if h200_floor_ms is None else h200_floor_ms
    card_floor = base if floor_ms is None else floor_ms
    if h200_ms <= 0 or work.kv_bytes < 0 or work.flops < 0:
        raise CardModelError(f"work: expected a positive H200 time and non-negative bytes and FLOPs, found "
                             f"{h200_ms} ms, {work.kv_bytes} B, {work.flops} FLOP")
    bytes_ms = work.kv_bytes / (target.stream_gbps * 1e9) * 1e3
    tensor_ms = work.flops / (target.tensor_tflops(work.kind) * 1e12) * 1e3
    issue_ms = max(h200_ms - h200_floor, 0.0) * issue_scale(target, ref, work.ctas)
    return Prediction(card_floor + max(bytes_ms, tensor_ms, issue_ms), card_floor, bytes_ms, tensor_ms, issue_ms)


# Tensor work of our configurations: rows (draft node x head) padded to the configuration's row tile, QK over 576 dims
# per Q term (the e4m3 configurations hold Q as two e4m3 terms, the second multiplied on E4M3_TWO_TERM_STEPS of Q's
# 18 32-dim steps) and PV over 512.
SGLANG_TILES = {"sglang_extend": ("tokens", 32), "sglang_decode_1tok": ("heads", 16)}  # BLOCK_M / BLOCK_H on cc 9.x+
# kernels/mma_sync/verify_sm120_e4m3.cuh E4M3_TWO_TERMS (the 64-row form: the ring's fourth slot took the rest's
# shared memory, three of them held in registers instead); the 32-row form multiplies both terms on every step
# (tests/test_card_model.py holds the header to it)
E4M3_TWO_TERM_STEPS = {"verify_sm120_e4m3_kernel<64>": 14, "verify_sm120_e4m3_32_kernel": 18}


def padded_rows(impl: str, nodes: int, heads: int) -> int:
    """Rows of MMA work per request a call of ``impl`` issues for ``nodes`` x ``heads`` query rows: our
    configurations pad N x H to their row tile; SGLang's extend pads each head's N tokens to 32 (BLOCK_M), its decode
    one token per head to 16 heads (BLOCK_H)."""
    if impl in SGLANG_TILES:
        what, tile = SGLANG_TILES[impl]
        return heads * -(-nodes // tile) * tile if what == "tokens" else -(-heads // tile) * tile
    config = _config(impl)
    rows = nodes * heads
    return -(-rows // config.block_m) * config.block_m


def _config(impl: str):
    from ..kernels.impls import IMPLS
    from ..kernels.launch_plan import AUTO_CONFIGS

    i = IMPLS.get(impl)
    configs = {c.name: c for a in AUTO_CONFIGS for c in (a.config, a.fp8, a.fp8_e4m3) if c is not None}
    if i is None or i.kernel not in configs:
        raise CardModelError(f"impl {impl}: not a configuration the launcher selects (known: "
                             f"{', '.join(sorted(n for n, x in IMPLS.items() if x.kernel in configs))})")
    return configs[i.kernel]


def e4m3_two_term_steps(impl: str) -> int:
    """Q's 32-dim steps (of 18) on which ``impl`` (an e4m3 configuration) multiplies both of Q's e4m3 terms."""
    return E4M3_TWO_TERM_STEPS[_config(impl).name]


def verify_work(impl: str, batch: int, prefix: int, nodes: int, heads: int, kv: str = "bf16") -> Work:
    """The work of one call of ``impl`` on a shape: its pool's KV bytes and its padded MMA FLOPs over the prefix and
    the tree (SGLang's decode: one token per request)."""
    from ..checks.roofline import Shape
    from ..kernels.launch_plan import E4M3_CONFIGS

    e4m3 = impl not in SGLANG_TILES and _config(impl).name in E4M3_CONFIGS
    q_terms = 1 + e4m3_two_term_steps(impl) / 18 if e4m3 else 1
    n = 1 if impl == "sglang_decode_1tok" else nodes
    rows = padded_rows(impl, n, heads)
    flops = 2.0 * batch * rows * (prefix + n) * (D_QK * q_terms + D_V)
    ctas = batch * heads * -(-nodes // SGLANG_TILES[impl][1]) if impl == "sglang_extend" else None
    return Work(Shape(batch, prefix, nodes, heads, kv=kv).kv_bytes, flops, "e4m3" if e4m3 else "bf16", ctas)
