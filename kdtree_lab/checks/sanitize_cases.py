"""Small verify cases for compute-sanitizer (memcheck, racecheck, initcheck, synccheck) on a GPU.

``python -m kdtree_lab.checks.sanitize_cases`` runs the CUDA kernel and the Triton twin on a handful of edge cases
(tree and causal masks, both variants, padded rows, empty splits, N = 1, several H; the first three again over an
fp8 pool for the implementations that read one) and exits non-zero if any
output misses the oracle; the sanitizer's own exit code reports memory errors and races."""

from __future__ import annotations

import sys

from ..kernels.impls import IMPLS
from .parity import Case, fp8_cases, run_case

CASES = [
    Case("tree_eager", (70, 1, 33), 4, 8, nsplit=4),
    Case("causal_capture_padded", (130, 5), 5, 16, variant="capture", mask="causal", padded_bs=4, nsplit=3),
    Case("chain_capture_uint8", (300,), 8, 8, variant="capture", mask="chain", nsplit=2),
    Case("empty_splits", (3,), 4, 8, nsplit=16),
    Case("N1_H64", (257,), 1, 64, nsplit=2),
    Case("bigN", (200,), 64, 2, nsplit=2),
]


def main(argv: list[str] | None = None) -> int:
    """``--quick``: the first two cases and one over an fp8 pool, CUDA kernel only (initcheck is slow);
    ``--impl a,b``: these impls."""
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    impls = ("cuda",) if quick else ("cuda", "cuda_sm120", "triton")
    if "--impl" in argv:
        impls = tuple(argv[argv.index("--impl") + 1].split(","))
    bad = 0
    for impl in impls:
        cases = CASES[:2] if quick else CASES
        if "fp8" in IMPLS[impl].kv_dtypes:
            cases = cases + fp8_cases(CASES[:1] if quick else CASES[:3])
        for case in cases:
            r = run_case(impl, case, "cuda")
            print(f"{impl:6s} {case.name:24s} rel_l2={r.rel_l2:.2e} max_abs={r.max_abs:.2e} ok={r.ok}")
            bad += not r.ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
