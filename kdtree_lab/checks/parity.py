"""Kernel-vs-oracle parity: an edge grid, random draws, bf16-justified tolerances, and the validate mode.

Tolerances (bf16 outputs, fp32 accumulation): the output is rounded to bf16 (8 significant bits: up to one
unit in the last place, 2^-8 relative, where a conversion truncates) and the softmax weights enter PV as bf16
(2^-9 relative each). So a correct kernel stays within ``rel_l2 <= 1e-2`` and ``max_abs <= 2^-6 * max(1, |ref|max)``
(four ULPs at the largest magnitude); a wrong mask or index gives errors of 0.1 to 1.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import torch

from ..kernels.attention import runner
from ..kernels.impls import kv_refusal
from .batch import VerifyBatch, build_verify_batch
from .oracle import compare, reference

Impl = str  # a key of impls.IMPLS
REL_L2_TOL = 1e-2
MAX_ABS_ULPS = 2.0 ** -6


@dataclass(frozen=True)
class Case:
    """One parity case. ``nsplit`` prefix splits; ``padded_bs`` pads a capture batch with L=1 rows."""

    name: str
    prefix_lens: tuple[int, ...]
    num_draft: int
    num_heads: int
    variant: str = "eager"
    mask: str = "tree"
    nsplit: int = 4
    padded_bs: int | None = None
    seed: int = 0
    v_extend_from_k: bool = True
    kv_dtype: str = "bf16"  # or "fp8": SGLang's fp8_e4m3 pool
    k_scale: float = 1.0
    v_scale: float = 1.0

    def build(self, device: str | torch.device) -> VerifyBatch:
        return build_verify_batch(list(self.prefix_lens), self.num_draft, self.num_heads, variant=self.variant,
                                  mask=self.mask, padded_bs=self.padded_bs, seed=self.seed, device=device,
                                  v_extend_from_k=self.v_extend_from_k, kv_dtype=self.kv_dtype,
                                  k_scale=self.k_scale, v_scale=self.v_scale)


@dataclass
class CaseResult:
    case: Case
    max_abs: float
    rel_l2: float
    nan: int
    max_ref: float
    ok: bool
    seconds: float
    status_flags: int = 0

    def row(self) -> dict:
        c = self.case
        return {"name": c.name, "B": len(c.prefix_lens), "L_max": max(c.prefix_lens), "N": c.num_draft,
                "H": c.num_heads, "variant": c.variant, "mask": c.mask, "nsplit": c.nsplit, "kv_dtype": c.kv_dtype,
                "padded_bs": c.padded_bs, "max_abs": self.max_abs, "rel_l2": self.rel_l2, "nan": self.nan,
                "ok": self.ok, "seconds": round(self.seconds, 3)}


@dataclass
class ParityReport:
    impl: str
    device: str
    results: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.ok for r in self.results)

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)

    @property
    def worst(self) -> CaseResult | None:
        return max(self.results, key=lambda r: r.rel_l2, default=None)

    def summary(self) -> dict:
        w = self.worst
        return {"impl": self.impl, "device": self.device, "cases": len(self.results), "passed": self.passed,
                "failed": [r.case.name for r in self.results if not r.ok],
                "worst": w.row() if w else None,
                "max_rel_l2": max((r.rel_l2 for r in self.results), default=0.0),
                "max_abs": max((r.max_abs for r in self.results), default=0.0),
                "tolerance": {"rel_l2": REL_L2_TOL, "max_abs": "2^-6 * max(1, max|ref|)"}}


# e4m3 tensor-core math (launch_plan.E4M3_CONFIGS): Q and P rounded to e4m3, whose 3 mantissa bits leave each element
# within 2^-4 of its value; the output's error is then of the order of SGLang's own fp8 kernel's, which rounds both the
# same way (measured 0.003-0.062 rel_l2 and up to 0.12 max_abs / max(1, max|ref|) over the fp8 GPU grid, SGLang
# 0.023-0.141; docs/kernels.md, "fp8 pools"). Below it on that grid and on the committed fresh draw
# (data/results/h200/2026-12-04-fp8-fresh), but issue 51 reported up to 1.22x on its own draws: the gate against
# SGLang on the same case is within_sglang_error, which checks/fp8_fresh.py holds on fresh cases every run beside an
# aggregate bound over the draw.
E4M3_REL_L2_TOL = 0.1
E4M3_MAX_ABS = 2.0 ** -2


# Against SGLang's own kernel on the same case: ours may be at most this times SGLang's distance to the oracle, plus
# one bf16 unit in the last place (2^-8 relative: the output's own rounding, which neither kernel can beat, so two
# kernels both at the bf16 floor are not judged on their noise). Issue 51 reported ours up to 1.22x SGLang's on some
# fresh cases under e4m3 math. Per case this bound is loose (the one-term-Q form passes it): checks/fp8_fresh.py adds
# an aggregate bound over each fresh draw.
SGLANG_ERROR_FACTOR = 1.5
BF16_ULP = 2.0 ** -8


def within_sglang_error(ours_rel_l2: float, sglang_rel_l2: float) -> bool:
    """Whether our rel_l2 to the oracle is within SGLANG_ERROR_FACTOR x SGLang's on the same case + BF16_ULP."""
    return ours_rel_l2 <= SGLANG_ERROR_FACTOR * sglang_rel_l2 + BF16_ULP


def within_tolerance(err: dict[str, float], e4m3: bool = False) -> bool:
    """``err`` (oracle.compare's) within the bf16 tolerance, or e4m3 math's where ``e4m3``."""
    rel, mx = (E4M3_REL_L2_TOL, E4M3_MAX_ABS) if e4m3 else (REL_L2_TOL, MAX_ABS_ULPS)
    return err["nan"] == 0 and err["rel_l2"] <= rel and err["max_abs"] <= mx * max(1.0, err["max_ref"])


def e4m3_case(impl: Impl, case: Case, device: str | torch.device, fp8_math: str = "auto") -> bool:
    """Whether ``impl`` runs ``case`` with e4m3 tensor-core math (so e4m3's tolerance applies)."""
    from ..kernels.attention import e4m3_math

    bs = len(case.prefix_lens) if case.padded_bs is None else case.padded_bs
    return e4m3_math(impl, case.kv_dtype, bs, case.num_draft, case.num_heads, device, fp8_math)


def edge_cases(max_prefix: int = 2048, max_batch: int = 48, heads: tuple[int, ...] = (8, 16),
               big_n: int = 64) -> list[Case]:
    """The edge grid: length-1 and padded rows, empty splits, batch 48, odd lengths, every mask kind and variant
    (bool and uint8 masks, int32 and int64 qo_indptr), N = 1 and large N, several H."""
    h0 = heads[0]
    odd = min(max_prefix, 1001)
    cases = [
        Case("L1_single", (1,), 4, h0),
        Case("L1_N1_H1", (1,), 1, 1),
        Case("empty_splits", (5,), 4, h0, nsplit=16),
        Case("all_splits_short", (3, 2, 1), 4, h0, nsplit=64),
        Case("odd_lengths", (odd, 127, 129, 33), 5, h0, nsplit=7),
        Case("split_boundary", (128 * 4, 128 * 4 + 1, 128 * 4 - 1), 4, h0, nsplit=4),
        Case("batch48", tuple(1 + (i * 37) % 97 for i in range(max_batch)), 4, h0, nsplit=2),
        Case("capture_padded", (17, 300), 4, h0, variant="capture", padded_bs=6),
        Case("capture_padded_causal", (17, 300), 4, h0, variant="capture", mask="causal", padded_bs=5),
        Case("capture_chain_uint8", (64, 65), 6, h0, variant="capture", mask="chain"),
        Case("eager_bool_tree", (200, 3), 8, h0, variant="eager", mask="tree"),
        Case("eager_causal_none", (200, 3), 8, h0, variant="eager", mask="causal"),
        Case("v_extend_independent", (50, 70), 4, h0, v_extend_from_k=False),
        Case("N1_decode_like", (max_prefix,), 1, h0, nsplit=8),
        Case("bigN", (max(1, max_prefix // 2),), big_n, 2 if big_n > 16 else h0, nsplit=4),
        Case("long_prefix", (max_prefix,), 16, h0, nsplit=8),
    ]
    for h in heads[1:]:
        cases.append(Case(f"H{h}", (max(1, max_prefix // 4), 7), 4, h, nsplit=4))
    return cases


def random_cases(count: int, rng: np.random.Generator, max_prefix: int = 4096, max_batch: int = 8,
                 max_draft: int = 16, heads: tuple[int, ...] = (1, 2, 8, 16), nsplits: tuple[int, ...] = (1, 2, 3, 8),
                 budget_tokens: int | None = None) -> list[Case]:
    """Random draws: batch, log-uniform prefix lengths, N, H, mask kind, variant, padding, split count.

    ``budget_tokens`` caps B*L*N*H (the oracle's cost) so CPU runs stay short."""
    out = []
    for i in range(count):
        while True:
            bsz = int(rng.integers(1, max_batch + 1))
            lens = tuple(int(math.exp(rng.uniform(0, math.log(max_prefix)))) for _ in range(bsz))
            n = int(rng.integers(1, max_draft + 1))
            h = int(rng.choice(heads))
            if budget_tokens is None or sum(lens) * n * h <= budget_tokens:
                break
        variant = str(rng.choice(["eager", "capture"]))
        mask = str(rng.choice(["tree", "chain", "causal"]))
        padded = bsz + int(rng.integers(0, 3)) if variant == "capture" else None
        out.append(Case(f"random{i}", lens, n, h, variant, mask, int(rng.choice(nsplits)), padded,
                        seed=int(rng.integers(0, 2 ** 31))))
    return out


def fp8_cases(cases: list[Case], scales: tuple[tuple[float, float], ...] = ((0.75, 1.5), (1.0, 1.0), (2.0, 0.5))
              ) -> list[Case]:
    """The same cases over SGLang's fp8_e4m3 pool, cycling through (k_scale, v_scale) pairs other than 1."""
    return [replace(c, name=f"{c.name}_fp8", kv_dtype="fp8", k_scale=scales[i % len(scales)][0],
                    v_scale=scales[i % len(scales)][1]) for i, c in enumerate(cases)]


def grid(random_count: int, seed: int, max_prefix: int, max_batch: int, max_draft: int, heads: tuple[int, ...],
         budget_tokens: int | None = None, edge: bool = True) -> list[Case]:
    """The parity grid notebook 03 and ``kdtree-lab parity`` run: the edge grid (prefixes up to ``max_prefix``,
    batches up to ``max_batch``, N up to ``max_draft``) unless ``edge`` is False, then ``random_count`` random
    draws (B <= min(max_batch, 8), B*L*N*H <= ``budget_tokens``) from ``seed``."""
    cases = edge_cases(max_prefix=max_prefix, max_batch=max_batch, heads=heads, big_n=max_draft) if edge else []
    return cases + random_cases(random_count, np.random.default_rng(seed), max_prefix=max_prefix,
                                max_batch=min(max_batch, 8), max_draft=max_draft, heads=heads,
                                budget_tokens=budget_tokens)


def gpu_grid(random_count: int, seed: int, heads: tuple[int, ...] = (8, 16, 64, 128)) -> list[Case]:
    """The GPU grid the tests run per implementation: the edge grid at full size (prefixes up to 200k tokens,
    batch 48, N up to 64) plus ``random_count`` random draws (B <= 8, N <= 64, B*L*N*H <= 1e8)."""
    return grid(random_count, seed, max_prefix=200_000, max_batch=48, max_draft=64, heads=heads,
                budget_tokens=100_000_000)


def case_bytes(case: Case) -> int:
    """Bytes one case takes at its peak on its device: its batch (``batch.batch_bytes``) and the fp64 oracle."""
    from .batch import batch_bytes
    from .oracle import oracle_bytes

    rows = sum(case.prefix_lens) + 64 + 1
    padded = case.padded_bs or len(case.prefix_lens)
    lens = list(case.prefix_lens) + [1] * (padded - len(case.prefix_lens))
    return (batch_bytes(case.prefix_lens, case.num_draft, case.num_heads, case.variant, case.padded_bs,
                        case.kv_dtype, case.mask) + oracle_bytes(lens, case.num_draft, case.num_heads, rows))


def require_grid_fits(cases: list[Case], device: str | torch.device) -> None:
    """Refuse (env.SizeError, naming the grid's parameters) a grid whose largest case would not fit ``device``'s
    free memory, before any case is built."""
    from ..core.env import require_fits

    if not cases:
        return
    worst = max(cases, key=case_bytes)
    require_fits(case_bytes(worst), device, f"max_prefix/max_batch/max_draft/heads: case {worst.name}, "
                 f"{len(worst.prefix_lens)} request{'s' * (len(worst.prefix_lens) != 1)}, "
                 f"{sum(worst.prefix_lens):,} prefix tokens, N {worst.num_draft}, "
                 f"H {worst.num_heads}, with its fp64 oracle")


def run_case(impl: Impl, case: Case, device: str | torch.device, fp8_math: str = "auto") -> CaseResult:
    """Build the case (output poisoned with NaN), run the kernel (an fp8 pool under ``fp8_math``), compare with the
    fp64 oracle (at e4m3's tolerance where the call ran e4m3 tensor-core math)."""
    refusal = kv_refusal(impl, case.kv_dtype)
    if refusal:
        raise ValueError(f"{case.name}: {refusal}")
    batch = case.build(device)
    t0 = time.perf_counter()
    out, flags = runner(impl, fp8_math)(batch, case.nsplit)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    ref = reference(batch)
    rows = batch.live_bs * batch.max_extend_len  # padded rows' outputs are discarded by SGLang
    err = compare(out[:rows], ref[:rows])
    return CaseResult(case, err["max_abs"], err["rel_l2"], err["nan"], err["max_ref"],
                      within_tolerance(err, e4m3_case(impl, case, device, fp8_math)) and flags == 0, secs, flags)


def run_parity(impl: Impl, cases: list[Case], device: str | torch.device,
               progress: bool = False, fp8_math: str = "auto") -> ParityReport:
    report = ParityReport(impl, str(device))
    iterator = cases
    if progress:
        from ..core.display import progress as bar

        iterator = bar(cases, desc=f"parity {impl}", unit="case")
    for case in iterator:
        report.results.append(run_case(impl, case, device, fp8_math))
    return report


SGLANG_GAP_FACTOR = 1.5  # ours vs SGLang may differ by this times SGLang's own distance to the oracle (+ REL_L2_TOL)


def against_sglang(impls: Impl | Sequence[Impl], cases: list[Case], device: str | torch.device = "cuda") -> list[dict]:
    """Per case and implementation (one or several): ours and SGLang's own ``extend_attention_fwd`` on the same batch
    (each output poisoned with NaN first; SGLang and the fp64 oracle run once per case), each against the oracle and
    against each other (rel_l2 over live rows): the case's parameters, sglang_verdict's figures, ``e4m3`` (the call ran
    e4m3 math), the kernel's status ``flags`` and ``ok`` (the verdict, and no flag). Over an fp8 pool SGLang downcasts
    Q and P to e4m3 for the prefix (data/contracts/sglang-0.5.23-fp8-kv.yaml). Needs SGLang and a GPU."""
    from .sglang_kernels import extend_attention

    impls = (impls,) if isinstance(impls, str) else tuple(impls)
    rows = []
    for case in cases:
        batch = case.build(device)
        live = batch.live_bs * batch.max_extend_len
        theirs = extend_attention(batch, torch.full_like(batch.o, float("nan")))[:live]
        ref = reference(batch)[:live]
        for impl in impls:
            batch.o.fill_(float("nan"))
            ours, flags = runner(impl)(batch, case.nsplit)
            e4m3 = e4m3_case(impl, case, device)
            v = sglang_verdict(ours[:live], theirs, ref, e4m3=e4m3)
            rows.append({"impl": impl, "name": case.name, "lens": list(case.prefix_lens), "N": case.num_draft,
                         "H": case.num_heads, "kv_dtype": case.kv_dtype, "k_scale": case.k_scale,
                         "v_scale": case.v_scale, "variant": case.variant, "mask": case.mask,
                         "padded_bs": case.padded_bs, "nsplit": case.nsplit, "seed": case.seed, **v, "e4m3": e4m3,
                         "flags": int(flags), "ok": v["ok"] and flags == 0})
        del batch
    return rows


def sglang_verdict(ours: torch.Tensor, theirs: torch.Tensor, ref: torch.Tensor, judge_sglang: bool = True,
                   e4m3: bool = False) -> dict:
    """Our output and SGLang's on the same rows, each against the oracle ``ref`` and against each other. ``ok``:
    ours within tolerance (e4m3 math's where ``e4m3``) and (``judge_sglang``) no further from SGLang than
    SGLANG_GAP_FACTOR x SGLang's own error + REL_L2_TOL, and under e4m3 math within_sglang_error of the oracle
    (SGLang's kernel rounds Q and P to e4m3 too). ``judge_sglang=False`` where SGLang's output is not meaningful
    (its kernel under the Triton CPU interpreter): its figures are kept, not judged."""
    mine, sgl = compare(ours, ref), compare(theirs, ref)
    gap = compare(ours, theirs)["rel_l2"]
    ok = within_tolerance(mine, e4m3) and (not judge_sglang or (
        gap <= SGLANG_GAP_FACTOR * sgl["rel_l2"] + REL_L2_TOL
        and (not e4m3 or within_sglang_error(mine["rel_l2"], sgl["rel_l2"]))))
    return {"ours_rel_l2": mine["rel_l2"], "ours_max_abs": mine["max_abs"], "ours_nan": mine["nan"],
            "max_ref": mine["max_ref"], "sglang_rel_l2": sgl["rel_l2"], "sglang_max_abs": sgl["max_abs"],
            "sglang_nan": sgl["nan"], "ours_vs_sglang_rel_l2": gap, "sglang_judged": judge_sglang, "ok": bool(ok)}


class ValidationError(AssertionError):
    """Validate mode found an output outside the bf16 tolerance; the message names the worst row."""


def validated(run: Callable[[VerifyBatch], torch.Tensor], batch: VerifyBatch, mode: str = "validate") -> torch.Tensor:
    """Run a kernel under a mode: ``off`` returns the oracle (fp64 cast to bf16), ``on`` runs the kernel, ``validate``
    runs it, compares with the oracle and raises ValidationError naming (request, node, head) of the worst row.

    This mode reads results on the host, so it refuses to run under CUDA graph capture; the graph-safe validate
    mode is the device-side one of the CUDA graph notebook."""
    if mode not in ("off", "validate", "on"):
        raise ValueError(f"mode: expected off, validate or on, got {mode!r}")
    if batch.q.is_cuda and torch.cuda.is_current_stream_capturing():
        raise RuntimeError("validate mode compares on the host (a sync) and cannot run under CUDA graph capture")
    if mode == "off":
        batch.o.copy_(reference(batch).to(batch.o.dtype))
        return batch.o
    out = run(batch)
    if mode == "on":
        return out
    ref = reference(batch)
    rows = batch.live_bs * batch.max_extend_len
    err = compare(out[:rows], ref[:rows])
    if not within_tolerance(err):
        diff = (out[:rows].double().cpu() - ref[:rows].double().cpu()).abs().nan_to_num(nan=float("inf"))
        per_row = diff.amax(dim=-1)  # [rows, H]
        flat = int(per_row.argmax())
        tok, head = divmod(flat, per_row.shape[1])
        b, node = divmod(tok, batch.max_extend_len)
        raise ValidationError(f"validate: output differs from the fp64 oracle beyond bf16 tolerance: worst at "
                              f"request {b}, draft node {node}, head {head} (|diff| {float(per_row.max()):.3g}); "
                              f"rel_l2 {err['rel_l2']:.3g} (tol {REL_L2_TOL}), max_abs {err['max_abs']:.3g}, "
                              f"NaN {err['nan']}")
    return out


def report_rows(report: ParityReport) -> list[dict]:
    return [r.row() for r in report.results]


def case_dict(case: Case) -> dict:
    return asdict(case)
