"""``kdtree-lab speculate``: ours against today's best (vLLM's full-graph EAGLE-3 chain) by context and tree size,
the ratio with its band, then the sweep by tree size and kernel (a model)."""

from __future__ import annotations

import argparse
import sys

from ..lab.record import emit
from .args import as_flags, bounded_float, gpu_preset, ints_at_least, one_of, positive_int, positive_ints

# The setup's parameter names as the command spells them, to name a refused value by its flag.
FLAGS = ("measure", "accept_length", "accept_nodes", "step_context", "step_ms", "draft_ms", "context", "nodes", "batch", "draft",
         "quant", "model", "gpu", "tp", "heads")


def _flagged(message: str) -> str:
    """A setup error in the command line's words (``args.as_flags``: accept_length -> --accept-length)."""
    return as_flags(message, FLAGS)


def _text(res: dict, s, head: dict | None) -> str:
    from ..core.display import markdown_table
    from ..speculate import answer, published, sweep

    lines = []
    if head is not None:
        lines += [f"What our verify kernel buys against today's best ({res['label']}; kdtree_lab.speculate, "
                  "docs/speculation.md):", "", *([markdown_table(answer.table_rows(head)), ""] if head["rows"] else []),
                  answer.words(head), "",
                  "Today's best against its published measurements (model / measured - 1, one request):", "",
                  markdown_table(published.residual_rows()), ""]
    else:
        lines += ["No published measurement pins today's best for this deployment (only Kimi K2.6 on 8 x RTX PRO 6000, "
                  "TP8, int4 is): the tables below compare with no speculation, and without --step-ms every step is "
                  "a lower bound.", ""]
    chain_n = s.draft.chain[0]
    rows = []
    for r in res["rows"]:
        row = {"context": r["context"], "no speculation": r["no_spec"]["tokens_per_s"]}
        for k in r["chain"]:
            c = r["chain"][k]
            row[f"chain of {chain_n}, {k}"] = c["tokens_per_s"] if c["fits"] else "does not fit"
        for k, b in r["best"].items():
            row[f"best, {k}"] = f"{b['tokens_per_s']:.1f} ({b['kind']} of {b['nodes']})" if b else "does not fit"
        rows.append(row)
    kinds = "; ".join(f"{k}: {w}" for k, w in sweep.KERNEL_WORDS.items())
    lines += [f"Tokens per second per request by variant, draft {s.draft.name} ({res['label']}; {kinds}):", "",
              markdown_table(rows), ""]
    lines += [b["words"] for b in res["break_even"].values()]
    lines += ["", "Inputs, each with its source:", "", markdown_table(res["inputs"])]
    return "\n".join(lines)


def cmd_speculate(args: argparse.Namespace) -> int:
    from ..speculate import answer, kernel_times, sweep
    from ..speculate.step import target

    try:
        if (args.accept_length is None) != (args.accept_nodes is None):
            raise ValueError("accept_length and accept_nodes: expected both (a measured acceptance and the chain "
                             "size it was measured at) or neither, found one")
        measured = None
        if args.measure:
            heads = target(args.gpu, args.model, args.tp, args.quant, {"copy_gbps": 1, "gemm_tflops": 1}).heads
            measured, why = kernel_times.measure_here(args.gpu, heads, args.batch, progress=not args.json)
            if why:
                raise ValueError(f"measure: {why} (without --measure the committed results are used)")
        s = sweep.setup(args.gpu, args.model, args.tp, args.quant, args.batch, args.draft, args.accept_length,
                        args.accept_nodes, args.step_ms, args.step_context, args.draft_ms,
                        tuple(args.nodes), measured)
        res = sweep.sweep(s, tuple(args.context))
        head = answer.headline(s, tuple(args.context)) if s.today is not None else None
    except ValueError as exc:  # StepInputError, KernelTimeError and the checks above
        print(f"kdtree-lab speculate: {_flagged(str(exc))}", file=sys.stderr)
        return 2
    if head is not None:
        res = {"headline": head, **res}
    emit(args, res, _text(res, s, head))
    return 0


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


_positive_float.__name__ = "a number > 0"


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    from ..speculate.presets import drafts
    from ..speculate.sweep import DEFAULT_CONTEXTS, DEFAULT_NODES

    p = sub.add_parser("speculate", help="ours against today's best (vLLM's full-graph EAGLE-3 chain) by context and "
                                         "tree size, the ratio with its band (a model of one decode step; runs on a "
                                         "CPU from committed results)")
    p.add_argument("--gpu", default="rtx-pro-6000", type=gpu_preset, help="GPU preset (data/presets/gpus.yaml)")
    p.add_argument("--model", default="kimi-k2", help="model preset (data/presets/models.yaml)")
    p.add_argument("--tp", type=positive_int, default=8, help="tensor parallel size (the model's heads split over it)")
    p.add_argument("--quant", default="int4", help="checkpoint quantisation: int4, fp8, bf16")
    p.add_argument("--context", type=positive_ints, default=list(DEFAULT_CONTEXTS),
                   help="context lengths in tokens, comma-separated (default 4096 ... 262144)")
    p.add_argument("--batch", type=positive_int, default=1, help="concurrent requests, each verifying its own tree")
    p.add_argument("--draft", default="dflash-gsm8k", type=one_of(drafts),
                   help=f"acceptance preset (data/presets/speculation.yaml: {', '.join(drafts())})")
    p.add_argument("--nodes", type=ints_at_least(2), default=list(DEFAULT_NODES),
                   help="tree sizes N to model, root included (default 4,8,16,32,64)")
    p.add_argument("--accept-length", type=_positive_float,
                   help="your measured acceptance: tokens per step as SGLang's 'accept len' logs it (with --accept-nodes)")
    p.add_argument("--accept-nodes", type=positive_int, help="the chain size (draft tokens + 1) it was measured at")
    p.add_argument("--step-ms", type=_positive_float,
                   help="your measured one-token decode step (ms; e.g. 1000 / SGLang's gen throughput at batch 1)")
    p.add_argument("--step-context", type=positive_int, help="the context (tokens) --step-ms was measured at")
    p.add_argument("--draft-ms", type=bounded_float(0), help="the draft's cost per step (ms; default: the preset's, cited)")
    p.add_argument("--measure", action="store_true",
                   help="time the kernels on this GPU first (a minute or two, progress shown; needs the GPU the "
                        "--gpu preset names, and SGLang for its rows) instead of the committed results")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_speculate)
