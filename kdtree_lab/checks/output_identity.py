"""Same bits as another build: the SHA-256 of each case's output under one implementation, written to JSON, and the
comparison of two such files. For a kernel change whose arithmetic is meant to be unchanged (a new schedule or
hand-off of the same values), equal digests on every case of the GPU grid are a stronger check than the oracle's
tolerance; the device call runs it once per build and compares.

    python3 -m kdtree_lab.checks.output_identity --impl cuda_sm120_roles --cases 100 --out main.json
    python3 -m kdtree_lab.checks.output_identity --compare main.json patch.json     # exit 1 where any differs
    python3 -m kdtree_lab.checks.output_identity --impl cuda_sm120_e4m3 --kv fp8 --cases 60 --out main.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

from ..kernels.attention import runner
from .parity import Case, fp8_cases, gpu_grid


def case_digest(impl: str, case: Case, device: str | torch.device) -> dict:
    """The case built on ``device`` (its output poisoned), run under ``impl``: the SHA-256 of its live output rows
    (bf16 bytes, rows past the live batch dropped as SGLang drops them) and the status flags."""
    batch = case.build(device)
    out, flags = runner(impl)(batch, case.nsplit)
    rows = batch.live_bs * batch.max_extend_len
    data = out[:rows].contiguous().view(torch.uint8).cpu().numpy().tobytes()
    return {"case": case.name, "sha256": hashlib.sha256(data).hexdigest(), "flags": int(flags), "bytes": len(data)}


def digests(impl: str, cases: list[Case], device: str | torch.device) -> list[dict]:
    """case_digest of every case, in order."""
    return [case_digest(impl, c, device) for c in cases]


def compare(a: dict, b: dict) -> list[str]:
    """One line per difference between two digest files' contents (their implementation, case list or any case's
    digest or flags); empty when every case has the same bits."""
    problems = []
    if a["impl"] != b["impl"]:
        problems.append(f"impl: {a['impl']} against {b['impl']}")
    names_a, names_b = [r["case"] for r in a["cases"]], [r["case"] for r in b["cases"]]
    if names_a != names_b:
        problems.append(f"cases: {len(names_a)} against {len(names_b)}, not the same list (same --cases and --seed?)")
        return problems
    for ra, rb in zip(a["cases"], b["cases"]):
        if ra["sha256"] != rb["sha256"] or ra["flags"] != rb["flags"]:
            problems.append(f"{ra['case']}: output {ra['sha256'][:12]} / {rb['sha256'][:12]}, "
                            f"flags {ra['flags']} / {rb['flags']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", default="cuda", help="the implementation to digest (kdtree_lab.kernels.impls)")
    ap.add_argument("--cases", type=int, default=100, help="random cases beside the edge grid (parity.gpu_grid)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--heads", default="8,16,64,128")
    ap.add_argument("--kv", choices=("bf16", "fp8"), default="bf16",
                    help="the pool: fp8 takes the same cases over SGLang's fp8_e4m3 pool (parity.fp8_cases), which "
                         "the configurations that read fp8 pools only (the e4m3 forms) need")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, help="where the digests go (JSON)")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="two digest files: exit 1 if they differ")
    a = ap.parse_args(argv)
    if a.compare:
        first, second = (json.loads(p.read_text()) for p in a.compare)
        problems = compare(first, second)
        for line in problems:
            print(line)
        print(f"{'DIFFERENT' if problems else 'identical'}: {len(problems)} of {len(first['cases'])} cases differ")
        return 1 if problems else 0
    if not a.out:
        ap.error("--out: expected a path for the digests (or --compare A B)")
    cases = gpu_grid(a.cases, a.seed, tuple(int(h) for h in a.heads.split(",")))
    if a.kv == "fp8":
        cases = fp8_cases(cases)  # each case's name then says its pool, so a bf16 file never compares equal to it
    rows = digests(a.impl, cases, a.device)
    a.out.write_text(json.dumps({"impl": a.impl, "kv": a.kv, "seed": a.seed, "random_cases": a.cases, "cases": rows},
                                indent=1))
    print(f"{a.impl}: {len(rows)} cases digested, {sum(r['flags'] != 0 for r in rows)} with flags, to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
