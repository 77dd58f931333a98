"""``kdtree-lab capture``: the verify call captured in CUDA graphs at SGLang's sizes, replays proved."""

from __future__ import annotations

import argparse

from ..kernels.impls import IMPLS
from ..lab.record import emit
from .args import bounded_int, positive_int, positive_ints


def cmd_capture(args: argparse.Namespace) -> int:
    import torch

    from ..checks.capture_plants import planted_findings
    from ..core.display import markdown_table

    plants = planted_findings("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        emit(args, {"capture_audit_plants": plants, "skipped": "graph capture needs a CUDA GPU"},
              markdown_table(plants) + "\n\ngraph capture and replay need a CUDA GPU: only the audit ran")
        return 2
    from ..checks.graphs import GraphConfig, enablement, graph_checks, pool_fields

    sizes = tuple(args.bs or ())
    cfg = GraphConfig(max_bs=max(sizes or (args.max_bs,)), num_draft=args.draft, num_heads=args.heads, ctx=args.ctx,
                      impl=args.impl, mask=args.mask, sizes=sizes, **pool_fields(args.kv_dtype))
    result = enablement(cfg, replays=args.replays, seed=args.seed) | {"capture_audit_plants": plants}
    checks = graph_checks(result, plants)
    rep = result["replay"]
    text = (f"captured {len(result['capture'])} sizes; graph pool {result['graph_pool_bytes_total'] / 2**20:.1f} MiB, "
            f"workspace {result['workspace_bytes'] / 2**20:.1f} MiB\n"
            f"replays: {rep['replays_per_size']} per size, {rep['mismatches_vs_eager']} mismatches vs eager, "
            f"{rep['oracle_failures']} oracle failures, addresses stable: {rep['addresses_stable']}\n"
            f"audit of the captured call: {'capture-safe' if result['audit_capture_safe'] else result['audit']}\n"
            + markdown_table(result["validate_in_graph"]) + "\n\n" + markdown_table(plants)
            + "\n\n" + markdown_table(checks))
    emit(args, result | {"checks": checks}, text)
    ok = all(c["ok"] for c in checks)
    return 0 if ok else 1


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("capture", help="capture the verify call in CUDA graphs at SGLang's sizes and prove replays")
    p.add_argument("--bs", type=positive_ints, help="comma-separated batch sizes (default: SGLang's 23 verify sizes up to --max-bs)")
    p.add_argument("--max-bs", type=positive_int, default=48, help="largest batch (persistent buffers are sized for it)")
    p.add_argument("--draft", type=positive_int, default=16, help="N draft tokens per request")
    p.add_argument("--heads", type=positive_int, default=8, help="H local heads")
    p.add_argument("--ctx", type=bounded_int(1, 1 << 22), default=1024, help="longest prefix per request (tokens)")
    p.add_argument("--impl", choices=list(IMPLS), default="cuda",
                   help="kernel held by the graphs (cuda: the one this GPU selects; a cuda_* name forces one)")
    p.add_argument("--mask", choices=["tree", "causal"], default="tree", help="the draft mask of the batches")
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16",
                   help="KV pool held by the graphs (fp8: e4m3 with k_scale / v_scale other than 1)")
    p.add_argument("--replays", type=bounded_int(1, 100_000), default=100, help="fresh random batches replayed per size")
    p.add_argument("--seed", type=int, default=0, help="random seed of the generated batches")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_capture)
