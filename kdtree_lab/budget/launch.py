"""The SGLang launch line a budget ends with, and SGLang 0.5.23's rules for the speculative settings it passes."""

from __future__ import annotations

import shlex

from .inputs import BudgetInputs

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH")


def speculative_problem(algorithm: str, steps: int, topk: int, draft_tokens: int) -> str | None:
    """Why SGLang 0.5.23 would not run these speculative settings as given, or None. Its rules: top-k 1 drafts a
    chain and resets the draft tokens to steps + 1 (arg_groups/speculative_hook.py); a top-k > 1 tree picks
    N - 1 of topk + (steps - 1) x topk^2 scored candidates (speculative/eagle_utils.py organize_draft_results);
    DFLASH drafts one block, top-k 1, one step."""
    if algorithm not in SPEC_ALGORITHMS:
        return f"spec_algorithm: expected one of {', '.join(SPEC_ALGORITHMS)}, found {algorithm!r}"
    if algorithm == "DFLASH" and (topk != 1 or steps != 1):
        return (f"topk/spec_steps: DFLASH drafts a chain of draft_tokens (its block size) with topk 1 and one step; "
                f"got topk={topk}, spec_steps={steps}")
    if topk == 1 and algorithm != "DFLASH" and draft_tokens != steps + 1:
        return (f"draft_tokens: with topk 1 SGLang drafts a chain of spec_steps + 1 = {steps + 1} tokens, got "
                f"draft_tokens={draft_tokens} (for a tree set topk > 1)")
    if topk > 1:
        most = 1 + topk + (steps - 1) * topk * topk
        if not 2 <= draft_tokens <= most:
            return (f"draft_tokens: a topk={topk}, spec_steps={steps} tree has at most {most} tokens (the root and "
                    f"topk + (steps - 1) x topk^2 candidates), got {draft_tokens}")
    return None


def launch_args(inp: BudgetInputs, fraction: float) -> list[str]:
    """SGLang 0.5.23 server arguments for this deployment (what ``python -m kdtree_lab.sglang.serve`` passes on)."""
    args = ["--model-path", inp.model_path, "--tp", str(inp.tp), "--attention-backend", "triton",
            "--speculative-algorithm", inp.spec_algorithm, "--speculative-draft-model-path", inp.draft_model_path,
            "--speculative-num-steps", str(inp.spec_steps), "--speculative-eagle-topk", str(inp.topk),
            "--speculative-num-draft-tokens", str(inp.draft_tokens),
            "--cuda-graph-max-bs-decode", str(inp.max_bs), "--max-running-requests", str(inp.max_bs),
            "--context-length", str(inp.context), "--mem-fraction-static", f"{fraction:.3f}"]
    if inp.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if inp.chunked_prefill:
        args += ["--chunked-prefill-size", str(inp.chunked_prefill)]
    if not inp.cuda_graphs:
        args += ["--cuda-graph-backend-decode", "disabled"]  # the verify runner is the decode runner
    return args


def launch_line(inp: BudgetInputs, fraction: float, mode: str = "on") -> str:
    """The shell command that starts SGLang with the verify hook installed in every rank (kdtree_lab.sglang.serve)
    in hook ``mode`` (``validate`` for a first start: SGLang's kernel writes the output and ours is checked against
    it; ``on`` after), or stock SGLang when the deployment runs without the verify kernel."""
    if mode not in ("on", "validate"):
        raise ValueError(f"mode: expected on or validate, found {mode!r}")
    if not inp.verify_kernel:
        return "python -m sglang.launch_server " + shlex.join(launch_args(inp, fraction))
    return f"KDTREE_VERIFY={mode} python -m kdtree_lab.sglang.serve " + shlex.join(launch_args(inp, fraction))
