"""``kdtree-lab audit``: a generated verify batch against SGLang's buffer contract."""

from __future__ import annotations

import argparse

from ..lab.record import emit
from .args import FAILED, OK, BadArgument, as_flags, bounded_float, positive_int, positive_ints, seed

# build_verify_batch's parameter -> the flag that sets it, to name a refused value by its flag.
FLAGS = {"prefix_lens": "--prefix", "num_draft": "--draft", "num_heads": "--heads", "padded_bs": "--padded-bs",
         "seed": "--seed", "k_scale": "--k-scale", "v_scale": "--v-scale"}


def cmd_audit(args: argparse.Namespace) -> int:
    """Build a verify batch of the chosen variant and audit it (and the other variant's dtypes against it). Exit 0
    when it meets the contract, 1 when the audit finds a mismatch."""
    from ..checks.batch import build_verify_batch
    from ..contract.audit import audit

    if args.padded_bs is not None and args.variant != "capture":
        raise BadArgument(f"argument --padded-bs: applies to --variant capture only (a captured batch's padding), "
                          f"found --padded-bs {args.padded_bs} with --variant {args.variant}")
    try:  # the batch builder's own checks (padding below the live batch, a batch larger than free memory)
        batch = build_verify_batch(args.prefix, args.draft, args.heads,
                                   variant=args.variant, mask=args.mask, seed=args.seed, padded_bs=args.padded_bs,
                                   kv_dtype=args.kv_dtype, k_scale=args.k_scale, v_scale=args.v_scale)
    except ValueError as exc:
        raise BadArgument(as_flags(str(exc), FLAGS)) from None
    report = audit(batch.buffers(), variant=args.against or args.variant, kv_dtype=args.declare_kv_dtype)
    emit(args, report, report.table())
    return OK if report.ok else FAILED


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("audit", help="audit a generated verify batch against the SGLang buffer contract")
    p.add_argument("--variant", choices=["eager", "capture"], default="eager", help="which variant to build")
    p.add_argument("--against", choices=["eager", "capture"], help="audit against this variant (default: same)")
    p.add_argument("--prefix", type=positive_ints, default="37,200,1",
                   help="comma-separated prefix lengths (tokens); the batch must fit in 80%% of the free memory")
    p.add_argument("--draft", type=positive_int, default=8, help="N draft tokens per request")
    p.add_argument("--heads", type=positive_int, default=8, help="H local heads")
    p.add_argument("--mask", choices=["tree", "chain", "causal"], default="tree", help="the draft mask to build")
    p.add_argument("--padded-bs", type=positive_int, default=None,
                   help="with --variant capture: pad to this batch size, at least the live batch (default: the live "
                        "batch, no padding)")
    p.add_argument("--seed", type=seed, default=0, help="random seed of the generated batches")
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16", help="the pool to build (fp8: e4m3)")
    p.add_argument("--k-scale", type=bounded_float(0, low_open=True), default=1.0, help="k_scale passed with the batch")
    p.add_argument("--v-scale", type=bounded_float(0, low_open=True), default=1.0, help="v_scale passed with the batch")
    p.add_argument("--declare-kv-dtype", choices=["auto", "bf16", "fp8_e4m3"], default=None,
                   help="audit the pool against this --kv-cache-dtype (default: not checked)")
    p.add_argument("--json", action="store_true", help="print the audit as JSON")
    p.set_defaults(func=cmd_audit)
