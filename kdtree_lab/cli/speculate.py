"""``kdtree-lab speculate``: ours against today's best (vLLM's full-graph EAGLE-3 chain) by context and tree size,
the ratio with its band, then the sweep by tree size and kernel (a model)."""

from __future__ import annotations

import argparse

from ..lab.record import emit
from .args import OK, AnswerNo, BadArgument, as_flags, bounded_float, bounded_int, gpu_preset, ints_at_least, one_of, \
    positive_int, positive_ints

# The setup's parameter names as the command spells them, to name a refused value by its flag.
FLAGS = ("measure", "accept_length", "accept_nodes", "step_context", "step_ms", "draft_ms", "context", "nodes", "batch", "draft",
         "quant", "model", "gpu", "tp", "heads")


def _flagged(message: str) -> str:
    """A setup error in the command line's words (``args.as_flags``: accept_length -> --accept-length)."""
    return as_flags(message, FLAGS)


def _text(res: dict, s, head: dict | None, sources: bool) -> str:
    """The answer first (today's best against the best setup with ours, by context), one paragraph on what it rests
    on, the sweep by variant, the break-even contexts; the inputs with their sources and today's best against its
    published cells only with ``sources``."""
    from ..core.display import aligned_table, paragraph
    from ..speculate import answer, published, sweep

    lines = []
    if head is not None:
        if head["rows"]:
            lines += [aligned_table(_headline_rows(head, s.draft.name), title="Tokens per second per request: "
                                    f"today's best against the best setup with our verify kernel, draft "
                                    f"{s.draft.name} unless named ({res['label']})"), "",
                      paragraph(_caption(head, sources)), ""]
        else:
            lines += [paragraph(answer.words(head)), ""]
    else:
        lines += [paragraph("No published measurement pins today's best for this deployment (only Kimi K2.6 on 8 x "
                            "RTX PRO 6000, TP8, int4 is): the table compares with no speculation, and without "
                            "--step-ms every step is a lower bound."), ""]
    chain_n = s.draft.chain[0]
    rows = []
    for r in res["rows"]:
        row = {"context": r["context"], "no speculation": r["no_spec"]["tokens_per_s"]}
        for k, c in r["chain"].items():
            row[f"chain of {chain_n}, {k}"] = c["tokens_per_s"] if c["fits"] else "does not fit"
        for k, b in r["best"].items():
            row[f"best, {k}"] = f"{b['tokens_per_s']:.1f} ({b['kind']} {b['nodes']})" if b else "does not fit"
        rows.append(row)
    kinds = "; ".join(f"{k}: {w}" for k, w in sweep.KERNEL_WORDS.items())
    lines += [aligned_table(rows, title=f"By variant, draft {s.draft.name} (tokens per second per request; {kinds})"),
              "", *(paragraph(b["words"], indent="  ") for b in res["break_even"].values()), ""]
    if sources:
        if head is not None:
            lines += [aligned_table(published.residual_rows(), title="Today's best against its published measurements "
                                                                     "(model / measured - 1, one request):"), ""]
        lines += [aligned_table(res["inputs"], title="Inputs, each with its source:")]
    else:
        lines += ["Each input's value and source: --sources (or --json)."]
    return "\n".join(lines)


def _headline_rows(head: dict, draft: str) -> list[dict]:
    """The headline's rows for a terminal: numbers as numbers (right-aligned), "which" as the measuring table's
    DCP size and date, a setup without the sweep's own draft (the title names it)."""
    from ..speculate.published import k_words

    which = {"measured": "measured", "model": "model", "model, a prediction": "prediction"}
    return [{"context": k_words(r["context"]), "today's best": f"{r['today']:.1f}",
             "which": which.get(r["today_how"].split(" (")[0], r["today_how"]) + (
                 f" ({r['today_how'].split(', ', 1)[1]}" if r["today_how"].startswith("measured (") else ""),
             "best with ours": f"{r['ours']:.1f}",
             "setup": r["ours_setup"].replace(f" ({draft})", ""),
             "ratio (band)": f"{r['ratio']:.2f}x ({r['band'][0]:.2f}-{r['band'][1]:.2f})",
             "ours, today's EAGLE-3 chain": f"{r['same_draft']:.1f} ({r['same_draft_ratio']:.2f}x)"}
            for r in head["rows"]]


def _caption(head: dict, sources: bool) -> str:
    """What the headline rests on, in two sentences; where each number comes from with ``sources``."""
    from ..speculate import answer
    from ..speculate.published import k_words

    if sources:
        return answer.words(head)
    return (f"Today's best: {head['today']}, measured where its published table measured it, modelled elsewhere; "
            f"beyond {k_words(head['longest_measured'])} both sides are predictions. Band: the model's worst miss of "
            f"today's best, {head['band']:.0%}"
            + ("" if head["kernel_band"] == [1.0, 1.0] else
               f", and our kernel's time predicted for the card x{head['kernel_band'][0]:.2f} to "
               f"x{head['kernel_band'][1]:.2f} (the card model's checks), ours re-chosen at each end") + ".")


def cmd_speculate(args: argparse.Namespace) -> int:
    from ..speculate import answer, kernel_times, sweep
    from ..speculate.step import target

    if args.generation:
        from ..core.display import aligned_table
        from ..speculate import generation

        rows = generation.rows()
        emit(args, {"generation": rows, "words": generation.__doc__}, aligned_table(
            rows, title="The step model beside the generation check on the H200 (the same small model; verify "
                        "attention predicted, draft and host measured; data/results/h200/2026-12-04-generation)"))
        return OK
    contexts = tuple(args.context or sweep.DEFAULT_CONTEXTS)
    try:
        if (args.accept_length is None) != (args.accept_nodes is None):
            raise ValueError("accept_length and accept_nodes: expected both (a measured acceptance and the chain "
                             "size it was measured at) or neither, found one")
        if args.step_context is not None and args.step_ms is None:
            raise BadArgument("argument --step-context: applies with --step-ms only (the context a measured step "
                              f"time was measured at), found --step-context {args.step_context} without it")

        def configured(measured):
            return sweep.setup(args.gpu, args.model, args.tp, args.quant, args.batch, args.draft, args.accept_length,
                               args.accept_nodes, args.step_ms, args.step_context, args.draft_ms, tuple(args.nodes),
                               measured)

        s = configured(None)  # every input checked before a minute of timing
        if args.measure:
            heads = target(args.gpu, args.model, args.tp, args.quant, {"copy_gbps": 1, "gemm_tflops": 1}).heads
            measured, why = kernel_times.measure_here(args.gpu, heads, args.batch, progress=not args.json)
            if why:
                raise AnswerNo(f"--measure: {why} (without --measure the committed results are used)")
            s = configured(measured)
        res = sweep.sweep(s, contexts)
        head = answer.headline(s, contexts) if s.today is not None else None
    except sweep.DeploymentDoesNotFit as exc:  # a well-formed deployment the GPU cannot hold
        raise AnswerNo(str(exc)) from None
    except ValueError as exc:  # StepInputError, KernelTimeError and the checks above
        raise BadArgument(_flagged(str(exc))) from None
    if head is not None and args.context:  # contexts asked for: the headline shows those, not the table's own
        head = head | {"rows": [r for r in head["rows"] if r["context"] in contexts]}
    if head is not None:
        res = {"headline": head, **res}
    emit(args, res, _text(res, s, head, args.sources))
    return OK


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
    p.add_argument("--context", type=positive_ints, default=None,
                   help="context lengths in tokens, comma-separated; the headline shows these only (default: "
                        f"{','.join(map(str, DEFAULT_CONTEXTS))}, with the published table's own contexts in the "
                        "headline)")
    p.add_argument("--batch", type=positive_int, default=1, help="concurrent requests, each verifying its own tree")
    p.add_argument("--draft", default="dflash-gsm8k", type=one_of(drafts),
                   help=f"acceptance preset (data/presets/speculation.yaml: {', '.join(drafts())})")
    p.add_argument("--nodes", type=ints_at_least(2), default=list(DEFAULT_NODES),
                   help="tree sizes N to model, root included, from 2 to the largest the verify kernels were timed at "
                        "(64 in the committed results; below 4, the smallest timed, a tree takes the 4-node time) "
                        "(default 4,8,16,32,64)")
    p.add_argument("--accept-length", type=bounded_float(0, low_open=True),
                   help="your measured acceptance: tokens per step as SGLang's 'accept len' logs it (with --accept-nodes)")
    p.add_argument("--accept-nodes", type=bounded_int(2),
                   help="the chain size (draft tokens + 1, at least 2) it was measured at")
    p.add_argument("--step-ms", type=bounded_float(0, low_open=True),
                   help="your measured one-token decode step (ms; e.g. 1000 / SGLang's gen throughput at batch 1)")
    p.add_argument("--step-context", type=positive_int,
                   help="with --step-ms: the context (tokens) it was measured at")
    p.add_argument("--draft-ms", type=bounded_float(0), help="the draft's cost per step (ms; default: the preset's, cited)")
    p.add_argument("--measure", action="store_true",
                   help="time the kernels on this GPU first (a minute or two, progress shown; needs the GPU the "
                        "--gpu preset names, and SGLang for its rows) instead of the committed results")
    p.add_argument("--generation", action="store_true",
                   help="instead: the model beside the committed H200 generation runs of the same small model")
    p.add_argument("--sources", action="store_true",
                   help="also print every input with its source, and today's best against its published cells")
    p.add_argument("--json", action="store_true", help="print the result as JSON (inputs and sources included)")
    p.set_defaults(func=cmd_speculate)
