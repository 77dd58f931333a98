"""fp8 accuracy on cases no one chose (issue 51): fresh random fp8_e4m3 cases, every fp8 configuration this GPU runs
and SGLang's own fp8 kernel on each, both against the fp64 oracle, and the stated bound per case.

The draw: batch 1-5, T (draft tokens per request) 1-32, H 1-128 (uniform; every H >= 1 is served), ragged prefix
lengths log-uniform in 1..65535 with sum(L) x T x H <= ``BUDGET`` (the oracle's cost), tree / chain / causal masks,
eager / capture layouts, k_scale and v_scale each uniform in 0.25-2. The bound (``fresh_ok``): ours within its math's
tolerance of the oracle (parity.within_tolerance: e4m3's where the call ran e4m3 tensor-core math), no NaN, no status
flag, and within parity.within_sglang_error of SGLang's distance to the oracle on the same case.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np
import torch

from ..kernels.impls import IMPLS, sm90a_only
from . import parity

FRESH_COUNT = 60  # cases per configuration
MAX_BATCH, MAX_DRAFT, MAX_HEADS, MAX_PREFIX = 5, 32, 128, 65_536
SCALE_RANGE = (0.25, 2.0)  # k_scale, v_scale: each uniform
BUDGET = 20_000_000  # sum(L) x T x H per case: the fp64 oracle's cost, a fraction of a second on an H200
SEED_ENV = "KDT_FRESH_SEED"  # set to reproduce a run's draw


@dataclass(frozen=True)
class FreshRun:
    """One fresh draw run: its seed, the cases, per (case, configuration) rows (parity.against_sglang's, with
    ``ratio`` = ours / SGLang rel_l2 and ``ok`` = ``fresh_ok``) and per configuration ``summary``."""

    seed: int
    cases: tuple[parity.Case, ...]
    rows: tuple[dict, ...]
    summary: dict[str, dict]


def fresh_seed(environ: Mapping[str, str] = os.environ) -> int:
    """The seed of a draw: ``KDT_FRESH_SEED`` where set (to reproduce a run), else 32 bits from os.urandom."""
    if environ.get(SEED_ENV, "").strip():
        return int(environ[SEED_ENV])
    return int.from_bytes(os.urandom(4), "little")


def fresh_cases(count: int, seed: int, budget: int = BUDGET) -> list[parity.Case]:
    """``count`` fp8 cases drawn from ``seed`` (parity.random_cases over the issue's ranges, then fp8_cases with one
    (k_scale, v_scale) pair drawn per case), named ``fresh<i>``."""
    rng = np.random.default_rng(seed)
    cases = parity.random_cases(count, rng, max_prefix=MAX_PREFIX, max_batch=MAX_BATCH, max_draft=MAX_DRAFT,
                                heads=tuple(range(1, MAX_HEADS + 1)), budget_tokens=budget)
    scales = tuple((round(float(rng.uniform(*SCALE_RANGE)), 4), round(float(rng.uniform(*SCALE_RANGE)), 4))
                   for _ in cases)
    return [replace(c, name=f"fresh{i}") for i, c in enumerate(parity.fp8_cases(cases, scales))]


def fp8_impls(compute_capability: int | None = None) -> tuple[str, ...]:
    """Every implementation that reads fp8 pools and runs on a GPU of ``compute_capability`` (major x 10 + minor):
    the wgmma configurations on 9.x only; the sm_120 ones run under sm_120's limits anywhere with their shared
    memory (the H200 included). None: every one, on whatever GPU it runs."""
    return tuple(n for n, i in IMPLS.items() if "fp8" in i.kv_dtypes
                 and (compute_capability is None or not sm90a_only(n) or compute_capability // 10 == 9))


def draw_words(count: int) -> dict:
    """The draw's ranges as a result file records them."""
    return {"count": count, "batch": [1, MAX_BATCH], "T": [1, MAX_DRAFT], "H": [1, MAX_HEADS],
            "prefix": [1, MAX_PREFIX - 1], "prefix_law": "log-uniform", "scales": list(SCALE_RANGE),
            "budget_sum_L_T_H": BUDGET, "masks": ["tree", "chain", "causal"], "variants": ["eager", "capture"]}


def bound_words() -> dict:
    """The bounds a fresh draw is held to, per case and per configuration, as a result file records them."""
    return {"rel_l2": parity.REL_L2_TOL, "max_abs": f"{parity.MAX_ABS_ULPS:g} x max(1, max|ref|)",
            "e4m3_rel_l2": parity.E4M3_REL_L2_TOL, "e4m3_max_abs": f"{parity.E4M3_MAX_ABS:g} x max(1, max|ref|)",
            "sglang_error_factor": parity.SGLANG_ERROR_FACTOR, "sglang_error_floor": parity.BF16_ULP,
            "ratio_median_max": RATIO_MEDIAN_MAX, "ratio_p90_max": RATIO_P90_MAX}


def fresh_ok(row: dict) -> bool:
    """The stated bound on one row: within its math's oracle tolerance, no NaN, no status flag, and within
    parity.within_sglang_error of SGLang's rel_l2 on the same case."""
    err = {"rel_l2": row["ours_rel_l2"], "max_abs": row["ours_max_abs"], "max_ref": row["max_ref"],
           "nan": row["ours_nan"]}
    return (parity.within_tolerance(err, row["e4m3"]) and row["flags"] == 0
            and parity.within_sglang_error(row["ours_rel_l2"], row["sglang_rel_l2"]))


def judged(row: dict) -> dict:
    """``row`` with ``ratio`` (ours / SGLang rel_l2, inf where SGLang's is 0) and ``ok`` replaced by ``fresh_ok``."""
    sgl = row["sglang_rel_l2"]
    return {**row, "ratio": row["ours_rel_l2"] / sgl if sgl else float("inf"), "ok": fresh_ok(row)}


# The draw's aggregate bound per configuration, beside the per-case one: a form that rounds like SGLang's kernel (Q
# as one e4m3 term, the first e4m3 form: median ratio 1.00 on the fp8 grid, above SGLang's on 90 of 169 cases,
# data/results/h200/2026-12-02-e4m3/call4-accuracy-hook) passes the per-case bound but not this one; the two-term
# form measured a median of 0.43 and a largest ratio of 0.86 (data/results/h200/2026-12-04-fp8-fresh).
RATIO_MEDIAN_MAX = 0.7  # the median over the draw of ours / SGLang's rel_l2
RATIO_P90_MAX = 1.0  # its 90th percentile: at most one case in ten as far from the oracle as SGLang's


def aggregate_ok(s: dict) -> bool:
    """Whether a configuration's ``summary`` meets the draw's aggregate bound (RATIO_MEDIAN_MAX, RATIO_P90_MAX)."""
    return s["ratio_median"] <= RATIO_MEDIAN_MAX and s["ratio_p90"] <= RATIO_P90_MAX


def summary_words(impl: str, s: dict) -> str:
    """One configuration's ``summary`` in one line."""
    return (f"{impl:20s} e4m3 {s['e4m3']:>2}/{s['count']} rel_l2 median {s['rel_l2_median']:.3g} p90 "
            f"{s['rel_l2_p90']:.3g} max {s['rel_l2_max']:.3g}; ours / SGLang median {s['ratio_median']:.2f} p90 "
            f"{s['ratio_p90']:.2f} max {s['ratio_max']:.2f}, above SGLang {s['above_sglang']}; failed {s['failed']}")


def aggregate_words(impl: str, s: dict, seed: int) -> str:
    """Why ``impl``'s ``summary`` misses the aggregate bound, in one line with the seed that reproduces it."""
    return (f"{impl} ({SEED_ENV}={seed}): ours / SGLang median {s['ratio_median']:.2f} (at most {RATIO_MEDIAN_MAX}), "
            f"p90 {s['ratio_p90']:.2f} (at most {RATIO_P90_MAX})")


def _quantile(values: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(values, dtype=float), q))


def summary(rows: list[dict]) -> dict:
    """Figures of a group of judged rows: count, median / p90 / max of our rel_l2, the max of max_abs / max(1,
    max|ref|), median / p90 / max ratio to SGLang, how many above SGLang (ratio > 1), how many e4m3 and how many fail."""
    rel = [r["ours_rel_l2"] for r in rows]
    ratio = [r["ratio"] for r in rows]
    return {"count": len(rows), "rel_l2_median": statistics.median(rel), "rel_l2_p90": _quantile(rel, 0.9),
            "rel_l2_max": max(rel), "max_abs_rel_max": max(r["ours_max_abs"] / max(1.0, r["max_ref"]) for r in rows),
            "sglang_rel_l2_median": statistics.median(r["sglang_rel_l2"] for r in rows),
            "ratio_median": statistics.median(ratio), "ratio_p90": _quantile(ratio, 0.9), "ratio_max": max(ratio),
            "above_sglang": sum(x > 1 for x in ratio), "e4m3": sum(bool(r["e4m3"]) for r in rows),
            "failed": sum(not r["ok"] for r in rows)}


def gate_miss_rate(ratios: list[float], count: int = FRESH_COUNT, draws: int = 20_000, seed: int = 0) -> float:
    """How often a ``count``-case draw misses the aggregate bound (``aggregate_ok``: the median and p90 of ours /
    SGLang), for a configuration whose ratios on fresh cases are distributed as ``ratios`` (measured ones, pooled over
    draws): the share of ``draws`` resamples (with replacement, numpy's generator from ``seed``) that miss it. A
    configuration at the bound's edge makes the GPU test (tests/test_gpu_fp8_fresh.py) fail that often."""
    if not ratios:
        raise ValueError("gate_miss_rate: expected measured ratios, found none")
    sample = np.random.default_rng(seed).choice(np.asarray(ratios, dtype=float), size=(draws, count))
    median, p90 = np.median(sample, axis=1), np.quantile(sample, 0.9, axis=1)
    return float(np.mean((median > RATIO_MEDIAN_MAX) | (p90 > RATIO_P90_MAX)))


def summaries(rows: list[dict]) -> dict[str, dict]:
    """``summary`` per configuration (the rows' ``impl``), in the rows' order."""
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    return {impl: summary([r for r in rows if r["impl"] == impl]) for impl in impls}


def failure_words(row: dict, seed: int) -> str:
    """One failing row in one line: configuration, case, seed to reproduce, figures against the bound."""
    tol = parity.E4M3_REL_L2_TOL if row["e4m3"] else parity.REL_L2_TOL
    return (f"{row['impl']} on {row['name']} ({SEED_ENV}={seed}): B {len(row['lens'])} lens {row['lens']} T "
            f"{row['N']} H {row['H']} {row['mask']} {row['variant']} scales ({row['k_scale']}, {row['v_scale']}), "
            f"{'e4m3' if row['e4m3'] else 'exact'} math: ours rel_l2 {row['ours_rel_l2']:.4g} (tol {tol}), max_abs "
            f"{row['ours_max_abs']:.3g} of max|ref| {row['max_ref']:.3g}, NaN {row['ours_nan']}, flags {row['flags']};"
            f" SGLang {row['sglang_rel_l2']:.4g} (ours <= {parity.SGLANG_ERROR_FACTOR} x SGLang + {parity.BF16_ULP:g})")


def run_fresh(count: int = FRESH_COUNT, seed: int | None = None, impls: tuple[str, ...] | None = None,
              device: str | torch.device = "cuda", budget: int = BUDGET) -> FreshRun:
    """Draw ``count`` cases from ``seed`` (``fresh_seed()`` when None) and run each on every configuration of
    ``impls`` (default: ``fp8_impls`` of ``device``) and on SGLang's kernel (parity.against_sglang: one batch, one
    oracle and one SGLang call per case). Needs SGLang and a GPU."""
    seed = fresh_seed() if seed is None else seed
    if impls is None:
        major, minor = torch.cuda.get_device_capability(device)
        impls = fp8_impls(major * 10 + minor)
    cases = fresh_cases(count, seed, budget)
    rows = [judged(r) for r in parity.against_sglang(impls, cases, device)]
    return FreshRun(seed, tuple(cases), tuple(rows), summaries(rows))
