"""``kdtree-lab budget``: the memory budget and the launch line."""

from __future__ import annotations

import argparse
import sys

from ..lab.record import emit
from .args import positive_int, readable_file


def cmd_budget(args: argparse.Namespace) -> int:
    from ..budget.calculator import compute
    from ..budget.calibrate import calibrate, parse_sglang_log
    from ..budget.inputs import BudgetInputError, BudgetInputs
    from ..core.display import markdown_table

    try:
        inp = BudgetInputs(gpu=args.gpu, model=args.model, tp=args.tp, quant=args.quant, kv_dtype=args.kv_dtype,
                           max_bs=args.max_bs, draft_tokens=args.draft_tokens, topk=args.topk,
                           spec_steps=args.spec_steps, spec_algorithm=args.spec_algorithm,
                           model_path=args.model_path, draft_model_path=args.draft_model_path, nsplit=args.nsplit,
                           context=args.context, concurrency=args.concurrency, mem_fraction=args.mem_fraction,
                           chunked_prefill=args.chunked_prefill, margin_mib=args.margin_mib)
        if args.sglang_log:
            from pathlib import Path

            inp = calibrate(inp, parse_sglang_log(Path(args.sglang_log).read_text()))
        res = compute(inp)
    except BudgetInputError as exc:
        print(f"kdtree-lab budget: {exc}", file=sys.stderr)
        return 2
    if res.impossible:
        if args.json:
            emit(args, res, "")
        print(f"kdtree-lab budget: impossible deployment: {res.impossible}", file=sys.stderr)
        return 1
    text = (markdown_table(res.table()) + f"\n\nKV tokens: {res.kv_tokens} ({res.max_context_per_request} per "
            f"request at {inp.concurrency} concurrent)\nlargest safe fraction: {res.safe_fraction:.3f}; SGLang's "
            f"default: {res.sglang_default_fraction:.3f}; evaluated: {res.fraction:.3f}\n"
            + "".join(f"warning: {w}\n" for w in res.warnings) + res.launch_line)
    emit(args, res, text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("budget", help="memory budget: KV tokens, slack consumers and the --mem-fraction-static to pass")
    p.add_argument("--gpu", default="rtx-pro-6000", help="GPU preset (data/presets/gpus.yaml)")
    p.add_argument("--model", default="kimi-k2", help="model preset (data/presets/models.yaml)")
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
    p.add_argument("--nsplit", type=int, default=0,
                   help="the verify kernel's split count (0, the default: the kernel's own rule per batch size)")
    p.add_argument("--context", type=positive_int, default=200_000, help="context length per request (tokens)")
    p.add_argument("--concurrency", type=positive_int, default=8, help="concurrent requests the context must fit")
    p.add_argument("--mem-fraction", type=float, default=None, help="fraction to evaluate (default: the safe one)")
    p.add_argument("--chunked-prefill", type=int, default=None, help="chunked prefill size (default: SGLang's)")
    p.add_argument("--margin-mib", type=float, default=1024.0, help="safety margin (MiB)")
    p.add_argument("--sglang-log", type=readable_file, help="SGLang start-up log to calibrate G and the weights from")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_budget)
