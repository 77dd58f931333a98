"""``kdtree-lab budget``: the memory budget and the launch line."""

from __future__ import annotations

import argparse
import sys

from ..budget.prefill_activations import ACTIVATION_MODELS, DEFAULT_MARGIN
from ..lab.record import emit
from .args import OK, AnswerNo, BadArgument, as_flags, bounded_float, bounded_int, finite_float, gpu_preset, one_of, \
    positive_int, text_file

# BudgetInputs' field -> the flag that sets it, to name a refused value by its flag.
FLAGS = {n: "--" + n.replace("_", "-") for n in (
    "gpu", "model", "tp", "quant", "kv_dtype", "max_bs", "draft_tokens", "topk", "spec_steps", "spec_algorithm",
    "nsplit", "context", "concurrency", "mem_fraction", "chunked_prefill", "margin_mib", "activation_margin")} | {
    "activation_model": "--activations"}


def _models():
    from ..budget.presets import models

    return models()


def budget_inputs(args: argparse.Namespace):
    """The deployment the flags describe, checked by the budget's own rules (``calculator.compute`` refuses what it
    cannot budget, naming the field: refused here as its flag, exit 2)."""
    from ..budget.inputs import BudgetInputs

    if args.preset == "reference-decision" and args.mem_fraction is not None:
        raise BadArgument(f"argument --mem-fraction: does not apply with --preset reference-decision (it compares "
                          f"its own fractions), found --mem-fraction {args.mem_fraction:g}")
    for flag, value in (("--model-path", args.model_path), ("--draft-model-path", args.draft_model_path)):
        if not value.strip():
            raise BadArgument(f"argument {flag}: expected a checkpoint path for the launch line, found an empty value")
    return BudgetInputs(gpu=args.gpu, model=args.model, tp=args.tp, quant=args.quant, kv_dtype=args.kv_dtype,
                        max_bs=args.max_bs, draft_tokens=args.draft_tokens, topk=args.topk,
                        spec_steps=args.spec_steps, spec_algorithm=args.spec_algorithm,
                        model_path=args.model_path, draft_model_path=args.draft_model_path, nsplit=args.nsplit,
                        context=args.context, concurrency=args.concurrency, mem_fraction=args.mem_fraction,
                        chunked_prefill=args.chunked_prefill, margin_mib=args.margin_mib,
                        activation_model=args.activations, activation_margin=args.activation_margin,
                        cuda_graphs=not args.no_cuda_graphs, verify_kernel=not args.stock_verify)


def cmd_budget(args: argparse.Namespace) -> int:
    """The answer first (safe or not, the fraction, the KV tokens, the launch lines), then what it is made of.
    Exit 0 when the fraction evaluated is safe, 3 when it is not or no fraction fits (README: exit codes)."""
    from ..budget.calculator import compute
    from ..budget.inputs import BudgetInputError
    from ..budget.proposals import with_proposals
    from ..core.display import aligned_table, paragraph

    try:
        inp = budget_inputs(args)
        if args.sglang_log:
            inp = _calibrated(inp, args.sglang_log)
        compute(inp)  # the budget's own checks of every input, before either answer is built
        if args.preset == "reference-decision":
            return _reference_decision(args, inp)
        res = with_proposals(compute(inp))
    except BudgetInputError as exc:
        raise BadArgument(as_flags(str(exc), FLAGS)) from None
    proposals = ("\n\n" + aligned_table([p.row() for p in res.proposals],
                                         title="deployments that hold the context (each at its largest safe "
                                               "fraction):")
                 + f"\nfirst proposal's launch line:\n{res.proposals[0].launch_line}") if res.proposals else ""
    refused = res.refusal()  # one line naming the fractions to use instead; exit 3, no launch line
    if refused:  # the answer is that one line (stderr); --json carries the result, a deployment that cannot fit
        shown = proposals.lstrip("\n") if res.impossible else ""  # its proposals
        if args.json or shown:
            emit(args, res, shown)
        raise AnswerNo(refused)
    by_model = ", ".join(f"{m} {f:.3f}" for m, f in res.safe_fractions.items())
    said = [res.verdict(),
            f"largest safe fraction: {res.safe_fraction:.3f} (activations {res.activation}); by activation "
            f"estimate: {by_model}; SGLang's default: {res.sglang_default_fraction:.3f}",
            f"KV tokens: {res.kv_tokens:,} ({res.max_context_per_request:,} per request at {inp.concurrency} "
            "concurrent)", *(f"warning: {w}" for w in res.warnings)]
    launch = "\n".join(paragraph(line) if line.startswith(("launch line", "no launch line")) else line
                       for line in res.launch_text().splitlines())  # labels wrapped, the lines to paste whole
    text = ("".join(paragraph(line, indent="  ") + "\n" for line in said) + launch + "\n\n"
            + aligned_table(res.table(), title=f"memory of one GPU at fraction {res.fraction:.3f} (MiB; where: "
                                               "inside the fraction (pool) or in the slack it leaves)"))
    emit(args, res, text + proposals)
    return OK


def _calibrated(inp, log: str):
    """``inp`` with what an SGLang start-up log measured; a log that is not SGLang's is refused (exit 2). A log of
    SGLang's without the memory lines is warned about by name and changes nothing."""
    from pathlib import Path

    from ..budget.calibrate import LOG_LINES, calibrate, is_sglang_log, parse_sglang_log

    text = Path(log).read_text()
    if not is_sglang_log(text):
        raise BadArgument(f"argument --sglang-log {log}: expected an SGLang server log, found no line of SGLang's log "
                          f"format in its {len(text.splitlines())} lines")
    found = parse_sglang_log(text)
    if not found:
        print(f"warning: --sglang-log {log}: none of SGLang's memory lines ({', '.join(LOG_LINES)}) is in it; the "
              "estimates stand", file=sys.stderr)
    return calibrate(inp, found)


def _reference_decision(args: argparse.Namespace, inp) -> int:
    """The 0.93/0.94 (graphs off) -> 0.88 (graphs on, verify workspace) decision for ``inp``'s deployment: the
    largest safe fractions first, then the tables (the workspace's lines under one heading per layout)."""
    from dataclasses import replace
    from itertools import groupby

    from ..budget.scenario import reference_decision
    from ..core.display import aligned_table

    d = reference_decision(replace(inp, mem_fraction=None))
    safe = ", ".join(f"{m} {f:.3f}" for m, f in d["largest_safe_fraction"].items())
    safe_off = ", ".join(f"{m} {f:.3f}" for m, f in d["largest_safe_fraction_without_graphs"].items())
    workspace = [aligned_table([{k: v for k, v in r.items() if k != "workspace"} for r in rows], title=f"{name}:")
                 for name, rows in groupby(d["workspace"], key=lambda r: r.get("workspace"))]
    text = (f"largest safe fraction with graphs and the verify workspace: {safe}"
            f"\nlargest safe fraction without graphs: {safe_off}"
            "\n\n" + aligned_table(d["verdicts"], title="which are safe and why:")
            + "\n\n" + aligned_table(d["consumers"], title="what each fraction leaves (MiB):")
            + f"\n\n{d['workspace_title']}:\n\n" + "\n\n".join(workspace))
    emit(args, d, text)
    return OK


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
    p.add_argument("--mem-fraction", type=finite_float, default=None,  # its range: the budget's own rule
                   help="--mem-fraction-static to evaluate, a value in (0, 1), i.e. above 0 and below 1 (default: the "
                        "largest safe one); one that is not safe is refused with the fractions to use, exit 3")
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
