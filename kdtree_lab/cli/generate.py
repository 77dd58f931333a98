"""``kdtree-lab generate``: speculative decoding on a small MLA model, every token checked against greedy decoding."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..kernels.impls import IMPLS
from ..lab.record import emit
from .args import FAILED, INTERRUPTED, OK, AnswerNo, BadArgument, bounded_int, non_empty, positive_int, positive_ints, \
    seed

PATHS = ("ours", "hook", "sglang", "triton", "reference")  # kdtree_lab.generate.attend.PATHS (tests hold the two equal)
POOLS = ("bf16", "fp8")


def _names(allowed: tuple[str, ...] | None, what: str):
    """argparse type: a comma-separated list, non-empty, each name one of ``allowed`` (None: a draft name)."""

    def parse(text: str) -> list[str]:
        names = [v.strip() for v in text.split(",") if v.strip()]
        if not names:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, found an empty value")
        for name in names:
            if allowed is None:
                from ..generate.drafts import parse as draft

                try:
                    draft(name)
                except ValueError as exc:
                    raise argparse.ArgumentTypeError(str(exc)) from None
            elif name not in allowed:
                raise argparse.ArgumentTypeError(f"expected some of {', '.join(allowed)}, found {name!r}")
        return names

    return parse

PROFILES = {  # a CPU run that ends in minutes; the full run a GPU takes
    "cpu": dict(heads=(8,), layers=2, hidden=128, ffn=256, train_steps=60, train_batch=8, train_seq=128,
                contexts=(256,), prompts=2, new_tokens=32, drafts=("chain-4", "eagle-2x3-6", "ddtree-16-6"),
                paths=("reference",), pools=("bf16", "fp8"), device="cpu"),
    "gpu": dict(heads=(8,), contexts=(1024,), paths=("ours", "hook", "sglang", "reference"), device="cuda"),
}


def _spec(args: argparse.Namespace):
    from ..generate.run import GenerateSpec

    base = dict(PROFILES[args.profile])
    for name in ("heads", "contexts", "prompts", "new_tokens", "layers", "train_steps", "max_draft", "pool_tokens",
                 "impl", "seed"):
        value = getattr(args, name)
        if value is not None:
            base[name] = tuple(value) if isinstance(value, list) else value
    for name in ("drafts", "paths", "pools"):
        value = getattr(args, name)
        if value is not None:
            base[name] = tuple(value)
    if args.no_graphs:
        base["graphs"] = False
    if args.eager_too:
        base["eager_too"] = True
    return GenerateSpec(**base)


def cmd_generate(args: argparse.Namespace) -> int:
    """Checks first (exit 2 for a malformed value, 3 for a request this machine or pool cannot serve); then the
    runs with a progress line each; exit 0 when every token agrees with greedy decoding or its mismatch is
    explained, 1 otherwise, 130 on Ctrl-C after the summary of what ran."""
    from ..core.display import aligned_table, progress
    from ..generate.drafts import parse
    from ..generate.loop import GenerationInputError
    from ..generate.run import generate, plan, problems, rows

    try:
        spec = _spec(args)
        for d in spec.drafts:
            parse(d)
    except ValueError as exc:
        raise BadArgument(str(exc)) from None
    try:
        plan(spec)
    except GenerationInputError as exc:
        raise AnswerNo(str(exc)) from None
    except ValueError as exc:
        raise BadArgument(str(exc)) from None
    bar = progress(total=None, desc="generate", unit="run")

    def on_run(row: dict) -> None:
        bar.update(1)
        bar.set_postfix_str(f"{row['draft']} / {row['path']}: accept {row['accept_length'] or 0:.2f}, "
                            f"{row['check']['compared']} compared")

    result = generate(spec, on_run=on_run, on_stage=None if args.json else (lambda s: None))
    bar.close()
    bad = problems(result)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "generation.json").write_text(json.dumps(result, indent=1, default=float))
    title = ("Speculative decoding against greedy decoding (tokens compared teacher-forced with the fp32 reference; "
             "tok/s: all requests)")
    text = aligned_table(rows(result), title=title)
    if result["interrupted"]:
        text += "\n\ninterrupted (Ctrl-C): the runs above finished, the rest did not run"
    elif bad:
        text += "\n\n" + "\n".join(bad)
    else:
        text += "\n\nevery token equals greedy decoding's or sits at a near-tie within the path's numerical bound"
    emit(args, result, text)
    if result["interrupted"]:
        return INTERRUPTED
    return FAILED if bad else OK


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("generate", help="speculative decoding on a small MLA model, tokens checked against greedy")
    p.add_argument("--profile", choices=list(PROFILES), default="cpu",
                   help="cpu: a short run verified by the fp32 reference (--paths triton,reference adds the Triton twin); gpu: ours, the hook and "
                        "SGLang's kernel on a CUDA GPU")
    p.add_argument("--heads", type=positive_ints, help="per-rank head counts, one model each (e.g. 8,16,64)")
    p.add_argument("--contexts", type=positive_ints, help="prompt lengths in tokens (e.g. 1024,32768)")
    p.add_argument("--prompts", type=bounded_int(1, 64), help="requests in the batch")
    p.add_argument("--new-tokens", type=bounded_int(2, 1 << 16), help="tokens each request emits")
    p.add_argument("--layers", type=bounded_int(2, 64), help="decoder layers (the draft is the first)")
    p.add_argument("--train-steps", type=bounded_int(1, 1 << 20), help="training steps of the model")
    p.add_argument("--drafts", type=_names(None, "draft names"), help="comma-separated: chain-K, eagle-KxS-N, ddtree-N-D (e.g. chain-4,eagle-4x3-16)")
    p.add_argument("--paths", type=_names(PATHS, "verify paths"), help="comma-separated verify paths: ours, hook, sglang, triton, reference")
    p.add_argument("--pools", type=_names(POOLS, "KV pools"), help="comma-separated KV pools: bf16, fp8")
    p.add_argument("--max-draft", type=positive_int, help="the largest tree planned (SGLang's "
                                                          "--speculative-num-draft-tokens; default 64)")
    p.add_argument("--pool-tokens", type=positive_int, help="the KV pool's token slots (default: sized for the run)")
    p.add_argument("--impl", choices=list(IMPLS), help="the VerifyAttention implementation ours and the hook run (default cuda)")
    p.add_argument("--no-graphs", action="store_true", help="run the capture-safe paths eager instead of in graphs")
    p.add_argument("--eager-too", action="store_true", help="run the capture-safe paths eager as well as in graphs")
    p.add_argument("--seed", type=seed, help="the model's and the prompts' seed")
    p.add_argument("--out", type=non_empty("a folder"), help="a folder for generation.json (every run, every mismatch)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_generate)
