"""``kdtree-lab capture``: the verify call captured in CUDA graphs at SGLang's sizes, replays proved."""

from __future__ import annotations

import argparse

from ..kernels.impls import IMPLS, kv_refusal
from ..lab.record import emit
from .args import FAILED, OK, AnswerNo, BadArgument, as_flags, bounded_int, positive_int, positive_ints, seed

DEFAULT_MAX_BS = 48  # SGLang EAGLE's default max_running_requests


def cmd_capture(args: argparse.Namespace) -> int:
    """The arguments checked first (exit 2); without a GPU the capture-safety audit's planted findings, then exit
    3 (capture needs a CUDA GPU); on a GPU exit 0 when every check passes, 1 when one does not."""
    import torch

    from ..checks.capture_plants import planted_findings
    from ..core.display import aligned_table

    refusal = kv_refusal(args.impl, args.kv_dtype)
    if refusal:
        raise BadArgument(f"argument --kv-dtype {args.kv_dtype}: {refusal}")
    sizes = tuple(args.bs or ())
    if sizes and args.max_bs is not None and max(sizes) > args.max_bs:
        raise BadArgument(f"argument --bs: expected sizes up to --max-bs {args.max_bs} (the persistent buffers' "
                          f"batch), found {max(sizes)}")
    max_bs = args.max_bs if args.max_bs is not None else max(sizes or (DEFAULT_MAX_BS,))
    on_gpu = torch.cuda.is_available()
    plants = planted_findings("cuda" if on_gpu else "cpu")
    plant_table = aligned_table(plants, title="capture-safety audit on planted breakers:")
    if not on_gpu:
        emit(args, {"capture_audit_plants": plants, "skipped": "graph capture needs a CUDA GPU"}, plant_table)
        raise AnswerNo("graph capture and replay need a CUDA GPU, found none here: only the capture-safety audit ran")
    from ..checks.batch import batch_bytes, batch_words
    from ..checks.graphs import GraphConfig, enablement, graph_checks, pool_fields
    from ..core.env import SizeError, require_fits

    try:  # the persistent buffers: every captured size reads a batch of max_bs requests at --ctx
        require_fits(batch_bytes([args.ctx] * max_bs, args.draft, args.heads, "capture", None, args.kv_dtype,
                                 args.mask, args.ctx),
                     "cuda", "max_bs/ctx/draft/heads: " + batch_words([args.ctx] * max_bs, args.draft, args.heads,
                                                                    args.kv_dtype))
    except SizeError as exc:
        raise BadArgument(as_flags(str(exc), ["max_bs", "ctx", "draft", "heads"])) from None
    cfg = GraphConfig(max_bs=max_bs, num_draft=args.draft, num_heads=args.heads, ctx=args.ctx,
                      impl=args.impl, mask=args.mask, sizes=sizes, **pool_fields(args.kv_dtype))
    result = enablement(cfg, replays=args.replays, seed=args.seed) | {"capture_audit_plants": plants}
    checks = graph_checks(result, plants)
    rep = result["replay"]
    text = (f"captured {len(result['capture'])} sizes; graph pool {result['graph_pool_bytes_total'] / 2**20:.1f} MiB, "
            f"workspace {result['workspace_bytes'] / 2**20:.1f} MiB\n"
            f"replays: {rep['replays_per_size']} per size, {rep['mismatches_vs_eager']} mismatches vs eager, "
            f"{rep['oracle_failures']} oracle failures, addresses stable: {rep['addresses_stable']}\n"
            f"audit of the captured call: {'capture-safe' if result['audit_capture_safe'] else result['audit']}\n\n"
            + aligned_table(checks, title="checks:") + "\n\n"
            + aligned_table(result["validate_in_graph"], title="validate mode inside the graph:") + "\n\n"
            + plant_table)
    emit(args, result | {"checks": checks}, text)
    return OK if all(c["ok"] for c in checks) else FAILED


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("capture", help="capture the verify call in CUDA graphs at SGLang's sizes and prove replays")
    p.add_argument("--bs", type=positive_ints, help="comma-separated batch sizes (default: SGLang's 23 verify sizes up to --max-bs)")
    p.add_argument("--max-bs", type=positive_int, default=None,
                   help=f"largest batch, at least every --bs (persistent buffers are sized for it; default: the "
                        f"largest --bs, else {DEFAULT_MAX_BS})")
    p.add_argument("--draft", type=positive_int, default=16, help="N draft tokens per request")
    p.add_argument("--heads", type=positive_int, default=8, help="H local heads")
    p.add_argument("--ctx", type=bounded_int(1, 1 << 22), default=1024, help="longest prefix per request (tokens)")
    p.add_argument("--impl", choices=list(IMPLS), default="cuda",
                   help="kernel held by the graphs (cuda: the one this GPU selects; a cuda_* name forces one)")
    p.add_argument("--mask", choices=["tree", "causal"], default="tree", help="the draft mask of the batches")
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16",
                   help="KV pool held by the graphs (fp8: e4m3 with k_scale / v_scale other than 1)")
    p.add_argument("--replays", type=bounded_int(1, 100_000), default=100, help="fresh random batches replayed per size")
    p.add_argument("--seed", type=seed, default=0, help="random seed of the generated batches")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_capture)
