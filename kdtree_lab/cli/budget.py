"""``kdtree-lab budget``: the memory budget and the launch line."""

from __future__ import annotations

import argparse
import sys

from ..budget.prefill_activations import ACTIVATION_MODELS, DEFAULT_MARGIN
from ..lab.record import emit
from .args import as_flags, bounded_float, bounded_int, gpu_preset, one_of, positive_int, text_file

# BudgetInputs' field -> the flag that sets it, to name a refused value by its flag.
FLAGS = {n: "--" + n.replace("_", "-") for n in (
    "gpu", "model", "tp", "quant", "kv_dtype", "max_bs", "draft_tokens", "topk", "spec_steps", "spec_algorithm",
    "nsplit", "context", "concurrency", "mem_fraction", "chunked_prefill", "margin_mib", "activation_margin")} | {
    "activation_model": "--activations"}


def _models():
    from ..budget.presets import models

    return models()


def cmd_budget(args: argparse.Namespace) -> int:
    from ..budget.calculator import compute
    from ..budget.inputs import BudgetInputError, BudgetInputs
    from ..budget.proposals import with_proposals
    from ..core.display import markdown_table

    try:
        inp = BudgetInputs(gpu=args.gpu, model=args.model, tp=args.tp, quant=args.quant, kv_dtype=args.kv_dtype,
                           max_bs=args.max_bs, draft_tokens=args.draft_tokens, topk=args.topk,
                           spec_steps=args.spec_steps, spec_algorithm=args.spec_algorithm,
                           model_path=args.model_path, draft_model_path=args.draft_model_path, nsplit=args.nsplit,
                           context=args.context, concurrency=args.concurrency, mem_fraction=args.mem_fraction,
                           chunked_prefill=args.chunked_prefill, margin_mib=args.margin_mib,
                           activation_model=args.activations, activation_margin=args.activation_margin,
                           cuda_graphs=not args.no_cuda_graphs, verify_kernel=not args.stock_verify)
        if args.sglang_log:
            inp = _calibrated(inp, args.sglang_log)
            if inp is None:
                return 2
        if args.preset == "reference-decision":
            return _reference_decision(args, inp)
        res = with_proposals(compute(inp))
    except BudgetInputError as exc:
        print(f"kdtree-lab budget: {as_flags(str(exc), FLAGS)}", file=sys.stderr)
        return 2
    refused = res.refusal()  # one line naming the fraction to use instead; exit 3, no launch line
    if refused:
        if args.json:
            emit(args, res, "")
        print(f"kdtree-lab budget: {refused}", file=sys.stderr)
        if res.impossible and res.proposals:
            print("deployments that fit:\n" + markdown_table([p.row() for p in res.proposals]), file=sys.stderr)
        return 3
    by_model = ", ".join(f"{m} {f:.3f}" for m, f in res.safe_fractions.items())
    text = (markdown_table(res.table()) + f"\n\nKV tokens: {res.kv_tokens:,} ({res.max_context_per_request:,} per "
            f"request at {inp.concurrency} concurrent)\nlargest safe fraction: {res.safe_fraction:.3f} (activations "
            f"{res.activation}); SGLang's default: {res.sglang_default_fraction:.3f}; evaluated: {res.fraction:.3f}\n"
            f"largest safe fraction by activation estimate: {by_model}\n{res.verdict()}\n"
            + "".join(f"warning: {w}\n" for w in res.warnings)
            + res.launch_text())
    if res.proposals:
        text += ("\n\ndeployments that hold the context (each at its largest safe fraction):\n"
                 + markdown_table([p.row() for p in res.proposals])
                 + f"\nfirst proposal's launch line:\n{res.proposals[0].launch_line}")
    emit(args, res, text)
    return 0


def _calibrated(inp, log: str):
    """``inp`` with what an SGLang start-up log measured; None after a one-line refusal of a log that is not
    SGLang's. A log of SGLang's without the memory lines is warned about by name and changes nothing."""
    from pathlib import Path

    from ..budget.calibrate import LOG_LINES, calibrate, is_sglang_log, parse_sglang_log

    text = Path(log).read_text()
    if not is_sglang_log(text):
        print(f"kdtree-lab budget: --sglang-log {log}: expected an SGLang server log, found no line of SGLang's log "
              f"format in its {len(text.splitlines())} lines", file=sys.stderr)
        return None
    found = parse_sglang_log(text)
    if not found:
        print(f"warning: --sglang-log {log}: none of SGLang's memory lines ({', '.join(LOG_LINES)}) is in it; the "
              "estimates stand", file=sys.stderr)
    return calibrate(inp, found)


def _reference_decision(args: argparse.Namespace, inp) -> int:
    """The 0.93/0.94 (graphs off) -> 0.88 (graphs on, verify workspace) decision for ``inp``'s deployment."""
    from dataclasses import replace

    from ..budget.scenario import reference_decision
    from ..core.display import markdown_table

    d = reference_decision(replace(inp, mem_fraction=None))
    safe = ", ".join(f"{m} {f:.3f}" for m, f in d["largest_safe_fraction"].items())
    safe_off = ", ".join(f"{m} {f:.3f}" for m, f in d["largest_safe_fraction_without_graphs"].items())
    text = ("what each fraction leaves (MiB):\n" + markdown_table(d["consumers"])
            + "\n\nwhich are safe and why:\n" + markdown_table(d["verdicts"])
            + f"\n\nlargest safe fraction with graphs and the verify workspace: {safe}"
            + f"\nlargest safe fraction without graphs: {safe_off}"
            + f"\n\n{d['workspace_title']}:\n" + markdown_table(d["workspace"]))
    emit(args, d, text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("budget", help="memory budget: KV tokens, slack consumers and the --mem-fraction-static to pass")
    p.add_argument("--gpu", default="rtx-pro-6000", type=gpu_preset, help="GPU preset (data/presets/gpus.yaml)")
    p.add_argument("--model", default="kimi-k2", type=one_of(_models), help="model preset (data/presets/models.yaml)")
    p.add_argument("--tp", type=positive_int, default=8, help="tensor parallel size")
    p.add_argument("--quant", default="int4", help="weight quantisation of the preset: int4, fp8, bf16")
    p.add_argument("--kv-dtype", default="bf16", choices=["bf16", "fp8"], help="KV cache dtype")
    p.add_argument("--max-bs", type=positive_int, default=8, help="largest verify batch captured")
    p.add_argument("--draft-tokens", type=positive_int, default=16,
                   help="N draft tokens per request (--speculative-num-draft-tokens)")
    p.add_argument("--topk", type=positive_int, default=4,
                   help="--speculative-eagle-topk: > 1 drafts a tree; 1 a chain of --spec-steps + 1 tokens")
    p.add_argument("--spec-steps", type=positive_int, default=3, help="--speculative-num-steps")
    p.add_argument("--spec-algorithm", choices=["EAGLE", "EAGLE3", "DFLASH"], default="EAGLE",
                   help="--speculative-algorithm (DFLASH: a chain, --topk 1 --spec-steps 1)")
    p.add_argument("--model-path", default="MODEL_PATH", help="checkpoint the launch line passes to SGLang")
    p.add_argument("--draft-model-path", default="DRAFT_MODEL_PATH",
                   help="draft checkpoint the launch line passes (--speculative-draft-model-path)")
    p.add_argument("--nsplit", type=bounded_int(0, 512), default=0,
                   help="the verify kernel's split count (0, the default: the kernel's own rule per batch size)")
    p.add_argument("--context", type=positive_int, default=200_000, help="context length per request (tokens)")
    p.add_argument("--concurrency", type=positive_int, default=8, help="concurrent requests the context must fit")
    p.add_argument("--mem-fraction", type=bounded_float(0, 1, low_open=True, high_open=True), default=None,
                   help="fraction to evaluate, in (0, 1) (default: the largest safe one); one that is not safe is "
                        "refused with the fractions to use, exit 3")
    p.add_argument("--chunked-prefill", type=positive_int, default=None, help="chunked prefill size (default: SGLang's)")
    p.add_argument("--margin-mib", type=bounded_float(0), default=1024.0, help="safety margin (MiB)")
    p.add_argument("--activations", choices=ACTIVATION_MODELS, default=ACTIVATION_MODELS[0],
                   help="what the activation line follows: the chunked-prefill peak measured on the H200 (the "
                        "model where these shapes were not measured), the model, or SGLang's 1.5 MiB per token")
    p.add_argument("--activation-margin", type=bounded_float(0), default=DEFAULT_MARGIN,
                   help=f"margin over the measured / modelled activation peak (fraction, default {DEFAULT_MARGIN})")
    p.add_argument("--no-cuda-graphs", action="store_true",
                   help="CUDA graphs off (--cuda-graph-backend-decode disabled): no graph-time buffers or pool")
    p.add_argument("--stock-verify", action="store_true",
                   help="SGLang's own verify (no kdtree workspace; a plain sglang.launch_server line)")
    p.add_argument("--preset", choices=["reference-decision"],
                   help="reference-decision: the 0.93/0.94 (graphs off) vs 0.88 (graphs, verify workspace) "
                        "decision for this deployment (default: none, the budget itself)")
    p.add_argument("--sglang-log", type=text_file, help="SGLang start-up log to calibrate G and the weights from "
                                                             "(default: none, the presets' estimates)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_budget)
