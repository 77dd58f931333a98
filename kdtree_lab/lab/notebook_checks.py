"""The library's own rules for each notebook's parameters, applied by ``kdtree-lab run`` before the first notebook
starts (``runner.plan_parameters``): what a notebook would refuse minutes into a run is refused at once, in the
words of the ``-p`` flag that set it.

Each check builds the library's inputs the way its notebook does and asks the library (the budget's ``compute``,
the speculation ``setup``, the batch builder's ``require_batch``, the parity grid's size, the build's arch rule,
the implementation registry), so the rules have one home: the library. A notebook without a rule here is
checked by name, type and bound only (the runner's own checks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..core.display import as_parameters


class NotebookParameterError(ValueError):
    """A notebook parameter the library refuses; the message names it as ``-p NAME`` and the notebook."""


def _refuse(message: str, notebook: str, renames: dict[str, str] | None = None, names: tuple[str, ...] = ()) -> None:
    """Raise NotebookParameterError with the library's ``message`` worded as -p flags: ``renames`` maps a library
    name to the notebook's parameter, ``names`` are the same in both."""
    table = {n: f"-p {n}" for n in names} | {lib: f"-p {param}" for lib, param in (renames or {}).items()}
    raise NotebookParameterError(f"{as_parameters(message, table)} (notebook {notebook})")


def _within_rows(values: list, allowed, what: str, param: str, notebook: str) -> None:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise NotebookParameterError(f"argument -p {param}: expected {what} from {', '.join(map(str, allowed))}, "
                                     f"found {', '.join(map(repr, bad))} (notebook {notebook})")


def _seed(p: dict[str, Any], notebook: str) -> None:
    if "seed" in p and not 0 <= p["seed"] <= 2**32 - 1:
        raise NotebookParameterError(f"argument -p seed: expected an integer from 0 to {2**32 - 1}, found "
                                     f"{p['seed']} (notebook {notebook})")


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def dtype_audit(p: dict[str, Any], notebook: str) -> None:
    """01: the eager and the padded capture batch, bf16 and fp8, as the notebook builds them on the CPU."""
    from ..checks.batch import require_batch

    _seed(p, notebook)
    names = ("prefix_lens", "num_draft", "num_heads", "padded_bs", "seed")
    try:
        for variant, kv in (("eager", "bf16"), ("capture", "bf16"), ("capture", "fp8")):
            require_batch(p["prefix_lens"], p["num_draft"], p["num_heads"], variant=variant, seed=p["seed"],
                          padded_bs=p["padded_bs"] if variant == "capture" else None, kv_dtype=kv)
    except ValueError as exc:
        _refuse(str(exc), notebook, names=names)


def kernel_build(p: dict[str, Any], notebook: str) -> None:
    """02: the nvcc archs by the build's own rule; the Triton targets by the archs the resource limits know."""
    from ..kernels.build import LIMITS, arch_problem

    problem = arch_problem(p["archs"])
    if problem:
        _refuse(problem, notebook, names=("archs",))
    known = sorted(int(a.removeprefix("sm_")) for a in LIMITS)
    _within_rows(p["triton_capabilities"], known, "compute capabilities (x 10)", "triton_capabilities", notebook)


def eager_parity(p: dict[str, Any], notebook: str) -> None:
    """03: known implementations, the seed, and the grid's largest case within this machine's free memory."""
    from ..checks.parity import grid, require_grid_fits
    from ..kernels.impls import IMPLS

    _within_rows(p["impls"], list(IMPLS), "implementations", "impls", notebook)
    _seed(p, notebook)
    cases = grid(p["random_cases"], p["seed"], max_prefix=p["max_prefix"], max_batch=p["max_batch"],
                 max_draft=p["max_draft"], heads=tuple(p["heads"]), budget_tokens=p["budget_tokens"])
    try:
        require_grid_fits(cases, _device())
    except ValueError as exc:
        _refuse(str(exc), notebook, names=("max_prefix", "max_batch", "max_draft", "heads"))


def memory_budget(p: dict[str, Any], notebook: str) -> None:
    """04: the deployment as the notebook builds it (0 for mem_fraction and chunked_prefill: unset), through the
    budget's own checks (``calculator.compute``); the files it reads exist."""
    from dataclasses import fields

    from ..budget.calculator import compute
    from ..budget.inputs import BudgetInputError, BudgetInputs
    from ..core.paths import ROOT

    known = {f.name for f in fields(BudgetInputs)}
    given = {k: v for k, v in p.items() if k in known}
    given |= {k: given[k] or None for k in ("mem_fraction", "chunked_prefill") if k in given}
    fraction = p.get("mem_fraction", 0.0)
    if isinstance(fraction, (int, float)) and not fraction == 0 and not 0 < fraction < 1:  # nan too
        raise NotebookParameterError(f"argument -p mem_fraction: expected 0 (the largest safe fraction) or a value "
                                     f"in (0, 1), found {fraction!r} (notebook {notebook})")
    try:
        compute(BudgetInputs(**given))
    except BudgetInputError as exc:
        _refuse(str(exc), notebook, names=tuple(given))
    for name in ("graph_results", "sglang_state"):
        if name in p and not (ROOT / p[name]).is_file():
            raise NotebookParameterError(f"argument -p {name}: expected a results file under the repository, found "
                                         f"none at {p[name]} (notebook {notebook})")
    if p.get("sglang_log") and not Path(p["sglang_log"]).is_file():
        raise NotebookParameterError(f"argument -p sglang_log: expected an SGLang log file, found none at "
                                     f"{p['sglang_log']} (notebook {notebook})")


def cuda_graphs(p: dict[str, Any], notebook: str) -> None:
    """05: a known implementation that reads every pool asked for, known pools, the seed."""
    from ..core.dtypes import KV_DTYPES
    from ..kernels.impls import IMPLS, kv_refusal

    _within_rows([p["impl"]], list(IMPLS), "an implementation", "impl", notebook)
    _within_rows(p["kv_dtypes"], list(KV_DTYPES), "KV pools", "kv_dtypes", notebook)
    _seed(p, notebook)
    for kv in p["kv_dtypes"]:
        refusal = kv_refusal(p["impl"], kv)
        if refusal:
            raise NotebookParameterError(f"argument -p kv_dtypes: {refusal} (notebook {notebook})")


def benchmark(p: dict[str, Any], notebook: str) -> None:
    """06: a known preset and implementations; the committed results named exist."""
    from ..checks.bench_presets import PEER_IMPLS, PRESETS
    from ..core.paths import ROOT
    from ..kernels.impls import IMPLS

    _within_rows([p["preset"]], list(PRESETS), "a preset", "preset", notebook)
    _within_rows(p["impls"], [*IMPLS, *PEER_IMPLS], "implementations", "impls", notebook)
    if p["committed"] != "current" and not (ROOT / p["committed"]).is_file():
        raise NotebookParameterError(f"argument -p committed: expected \"current\" or a results JSON under the "
                                     f"repository, found none at {p['committed']} (notebook {notebook})")


def speculation(p: dict[str, Any], notebook: str) -> None:
    """07: the deployment, draft and tree sizes through the sweep's own ``setup`` and its contexts' rule."""
    from ..speculate import sweep

    try:
        s = sweep.setup(p["gpu"], p["model"], p["tp"], p["quant"], p["batch"], p["draft"], nodes=tuple(p["nodes"]))
        if not p["contexts"] or min(p["contexts"]) < 1:
            sweep.sweep(s, tuple(p["contexts"]))  # its own refusal of the contexts
    except ValueError as exc:
        _refuse(str(exc), notebook, renames={"context": "contexts"},
                names=("gpu", "model", "tp", "quant", "batch", "draft", "nodes"))


def generation(p: dict[str, Any], notebook: str) -> None:
    """08: draft names, paths and pools the generation check knows, sizes it accepts (a GPU path on a CPU is
    refused by the run itself, which says so in one line)."""
    from ..generate.drafts import parse
    from ..generate.run import POOLS, GenerateSpec
    from ..generate.attend import PATHS

    _within_rows(p["paths"], list(PATHS), "verify paths", "paths", notebook)
    _within_rows(p["pools"], list(POOLS), "KV pools", "pools", notebook)
    try:
        for d in p["drafts"]:
            parse(d)
        GenerateSpec(heads=tuple(p["heads"]), layers=p["layers"])
    except ValueError as exc:
        _refuse(str(exc), notebook, names=("drafts", "heads", "layers"))
    for name in ("layers", "hidden", "train_steps", "prompts", "new_tokens"):
        if not isinstance(p[name], int) or p[name] < (2 if name in ("layers", "new_tokens") else 1):
            raise NotebookParameterError(f"argument -p {name}: expected an integer >= "
                                         f"{2 if name in ('layers', 'new_tokens') else 1}, found {p[name]!r} "
                                         f"(notebook {notebook})")
    if not p["contexts"] or min(p["contexts"]) < 2 or not p["heads"] or min(p["heads"]) < 1:
        raise NotebookParameterError(f"argument -p contexts/heads: expected prompt lengths >= 2 and head counts >= 1, "
                                     f"found {p['contexts']}, {p['heads']} (notebook {notebook})")


RULES: dict[str, Callable[[dict[str, Any], str], None]] = {
    "01_dtype_audit": dtype_audit, "02_kernel_build": kernel_build, "03_eager_parity": eager_parity,
    "04_memory_budget": memory_budget, "05_cuda_graphs": cuda_graphs, "06_benchmark": benchmark,
    "07_speculation": speculation, "08_generation": generation}


def check(notebook: str, params: dict[str, Any]) -> None:
    """Apply ``notebook``'s rules to ``params`` (every parameter's value: its default, the profile's, -p's);
    raises NotebookParameterError naming the first value the library refuses."""
    rule = RULES.get(notebook)
    if rule is not None:
        rule(params, notebook)
