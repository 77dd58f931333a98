"""Small verify cases for compute-sanitizer (memcheck, racecheck, initcheck, synccheck) on a GPU.

``python -m kdtree_lab.checks.sanitize_cases`` runs the CUDA kernel and the Triton twin on a handful of edge cases
(tree and causal masks, both variants, padded rows, empty splits, N = 1, several H, one long split; the first three
again over an fp8 pool for the implementations that read one) and exits non-zero if any output misses the oracle; the
sanitizer's own exit code reports memory errors and races. ``--impl all`` runs every kernel configuration of the
library this GPU can launch (``every_configuration``)."""

from __future__ import annotations

import sys

from ..kernels.abi import ARCH_SM90A
from ..kernels.impls import IMPLS
from .parity import Case, fp8_cases, run_case

CASES = [
    Case("tree_eager", (70, 1, 33), 4, 8, nsplit=4),
    Case("causal_capture_padded", (130, 5), 5, 16, variant="capture", mask="causal", padded_bs=4, nsplit=3),
    Case("chain_capture_uint8", (300,), 8, 8, variant="capture", mask="chain", nsplit=2),
    Case("empty_splits", (3,), 4, 8, nsplit=16),
    Case("N1_H64", (257,), 1, 64, nsplit=2),
    Case("bigN", (200,), 64, 2, nsplit=2),
    Case("long_split", (1500,), 16, 8, nsplit=1),  # one split of 47 key tiles: every ring wraps many times
]


def every_configuration(configs: list[dict], compute_capability: int, smem_optin: int) -> tuple[str, ...]:
    """The forced implementations that together run every configuration of ``configs`` (the library's table,
    ``abi.configs``) a GPU of ``compute_capability`` (major * 10 + minor) and ``smem_optin`` bytes of shared memory
    per block can launch: each bf16 configuration by its own name, each e4m3 variant through the fp8 cases of an
    implementation that maps an fp8 pool to it. Raises ValueError naming a launchable configuration no
    implementation reaches."""
    runs = {c["kernel"]: c for c in configs
            if c["dynamic_smem"] <= smem_optin and (c["arch"] != ARCH_SM90A or compute_capability // 10 == 9)}
    chosen, reached = [], set()
    for impl in IMPLS.values():
        if impl.family == "cuda" and impl.kernel in runs and "bf16" in impl.kv_dtypes:
            chosen.append(impl.name)
            reached.add(impl.kernel)
            fp8 = runs[impl.kernel]["fp8_config"]
            if "fp8" in impl.kv_dtypes and fp8 >= 0:
                reached.add(configs[fp8]["kernel"])
    for impl in IMPLS.values():  # a configuration only a forced fp8 implementation runs (the e4m3 tensor-core one)
        if impl.family == "cuda" and impl.kernel in runs and impl.kernel not in reached and "bf16" not in impl.kv_dtypes:
            chosen.append(impl.name)
            reached.add(impl.kernel)
    missing = sorted(set(runs) - reached)
    if missing:
        raise ValueError(f"configs: no implementation runs {', '.join(missing)}")
    return tuple(chosen)


def _impls(arg: str) -> tuple[str, ...]:
    if arg != "all":
        return tuple(arg.split(","))
    import torch

    from ..kernels import loader

    props = torch.cuda.get_device_properties(0)
    return every_configuration(loader.library().configs(), props.major * 10 + props.minor,
                               int(props.shared_memory_per_block_optin))


def main(argv: list[str] | None = None) -> int:
    """``--quick``: the first two cases and one over an fp8 pool, CUDA kernel only (initcheck is slow);
    ``--impl a,b``: these impls; ``--impl all``: every configuration this GPU can launch."""
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    impls = ("cuda",) if quick else ("cuda", "cuda_sm120", "triton")
    if "--impl" in argv:
        impls = _impls(argv[argv.index("--impl") + 1])
        print(f"implementations: {', '.join(impls)}")
    bad = 0
    for impl in impls:
        cases = CASES[:2] if quick else CASES
        pools = IMPLS[impl].kv_dtypes
        if "bf16" not in pools:  # an fp8-only configuration runs every case over an fp8 pool
            cases = fp8_cases(cases)
        elif "fp8" in pools:
            cases = cases + fp8_cases(CASES[:1] if quick else CASES[:3])
        for case in cases:
            r = run_case(impl, case, "cuda")
            print(f"{impl:6s} {case.name:24s} rel_l2={r.rel_l2:.2e} max_abs={r.max_abs:.2e} ok={r.ok}")
            bad += not r.ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
