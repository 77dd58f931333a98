"""CPU estimate (issue 52): the 64-row e4m3 form's error against SGLang's if Q's second e4m3 term covered only part of
Q's 18 32-dim steps, the card-relevant way to fewer MMAs (docs/performance.md, "128 rows over fp8").

Each case: Q (rows x 576, bf16 normals, as the GPU grids draw it), an fp8 pool of L keys (bf16 normals rounded to
e4m3; V the first 512 dims of K, as MLA's latent), k_scale and v_scale uniform in 0.25-2, the model's sm_scale
(192^-0.5); the fp64 oracle over the dequantised pool. SGLang's rounding: Q and P (in [0, 1]) cast to e4m3. Ours:
each Q row scaled to 448 / max|row| and split into two e4m3 terms, the second times 2^-4 on the first (1 - share) of
the steps only; P rounded to e4m3 with its largest at 16 (its reference 4 log2 below the row maximum: the form's
rule with one reference a row, a simplification of its per-tile moves). Accumulation in fp64. Per share: the median,
90th percentile and max over cases of ours / SGLang's rel_l2, the figures the configuration gate holds to 0.7 and 1
(kdtree_lab/checks/fp8_fresh.py). A model of the rounding, not the kernel: the GPU's fresh draw decides.

    python scripts/second_term_share.py --out second-term-share.json [--cases 24] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import torch

D_QK, D_V, STEPS = 576, 512, 18
SM_SCALE = 192 ** -0.5
SHARES = (0.0, 2 / 18, 3 / 18, 4 / 18, 6 / 18, 1.0)  # of the 18 steps, in one term


def _e4m3(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float8_e4m3fn).to(torch.float64)


def case_ratios(gen: torch.Generator, keys: int, rows: int, shares=SHARES) -> dict[float, float]:
    """Ours / SGLang's rel_l2 against the fp64 oracle for one drawn case, per share of steps in one term."""
    u = lambda a, b: float(torch.empty(1).uniform_(a, b, generator=gen))  # noqa: E731
    k_scale, v_scale = u(0.25, 2.0), u(0.25, 2.0)
    q = torch.randn(rows, D_QK, generator=gen).to(torch.bfloat16).to(torch.float64)
    k = torch.randn(keys, D_QK, generator=gen).to(torch.bfloat16).to(torch.float8_e4m3fn).to(torch.float64)
    v = k[:, :D_V]

    def attend(qq: torch.Tensor, p_rule: str | None) -> torch.Tensor:
        s = qq @ k.T * (SM_SCALE * k_scale)
        s = s - s.amax(1, keepdim=True)
        p = torch.exp(s)
        if p_rule == "sglang":
            p = _e4m3(p)
        elif p_rule == "ours":
            p = _e4m3(p * 16.0)
        return p @ v * v_scale / p.sum(1, keepdim=True)

    ref = attend(q, None)
    rel = lambda o: float((o - ref).norm() / ref.norm())  # noqa: E731
    sglang = rel(attend(_e4m3(q), "sglang"))
    qs = 448.0 / q.abs().amax(1, keepdim=True).clamp_min(1e-30)
    first = _e4m3(q * qs)
    second = _e4m3((q * qs - first) * 16.0) / 16.0
    out = {}
    for share in shares:
        two = D_QK - 32 * round(share * STEPS)  # dims held in two terms (whole steps)
        qq = first.clone()
        qq[:, :two] += second[:, :two]
        out[share] = rel(attend(qq / qs, "ours")) / sglang
    return out


def run(cases: int, seed: int, rows: int = 32) -> dict:
    """``cases`` cases (L log-uniform in 64..8192) from ``seed``: per share, the ratio's median, p90 and max."""
    gen = torch.Generator().manual_seed(seed)
    per = {s: [] for s in SHARES}
    for _ in range(cases):
        keys = int(math.exp(float(torch.empty(1).uniform_(math.log(64), math.log(8192), generator=gen))))
        for s, r in case_ratios(gen, keys, rows).items():
            per[s].append(r)
    summary = []
    for s, v in per.items():
        v = sorted(v)
        summary.append({"share_one_term": round(s, 4), "steps_one_term": round(s * STEPS), "median": statistics.median(v),
                        "p90": v[min(len(v) - 1, int(0.9 * len(v)))], "max": v[-1]})
    return {"cases": cases, "seed": seed, "rows": rows, "sm_scale": SM_SCALE, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON result")
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    if a.cases < 1:
        ap.error(f"--cases >= 1 expected, found {a.cases}")
    result = run(a.cases, a.seed)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    for r in result["summary"]:
        print(f"{r['steps_one_term']:2} of 18 steps in one term: ours / SGLang rel_l2 median {r['median']:.2f}, "
              f"p90 {r['p90']:.2f}, max {r['max']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
