"""``kdtree-lab run``: execute the numbered notebooks headless through papermill.

Parameters come from the profile (``data/profiles/<name>.yaml``) and ``-p key=value`` overrides; every
name and type is checked against each notebook's ``parameters`` cell before anything runs. Output goes
to ``runs/<id>/``: the executed notebooks, each notebook's results JSON, ``summary.json``, ``summary.md`` and
``index.html`` (the summary and every executed notebook as HTML, to look at a run without Jupyter), and
``kernels.log`` when the notebook kernels wrote anything outside their cells (a kernel stopped by Ctrl-C does).
"""

from __future__ import annotations

import ast
import datetime as _dt
import json
import logging
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.display import HEADLESS_ENV, fmt
from ..core.paths import NOTEBOOKS, RUNS
from . import notebook_checks
from .profiles import Profile
from .record import load_results


class ParameterError(ValueError):
    """A ``-p`` override or profile value that no notebook accepts, or of the wrong type."""


@dataclass(frozen=True)
class NotebookEntry:
    """One row of ``notebooks/manifest.yaml``."""

    number: str
    name: str  # file stem, e.g. "03_eager_parity"
    title: str
    needs_gpu: str  # "no" | "optional" | "yes"
    cpu_minutes: float
    gpu_minutes: float
    source: Path | None = None  # default: notebooks/<name>.ipynb

    @property
    def path(self) -> Path:
        return self.source or NOTEBOOKS / f"{self.name}.ipynb"


def manifest() -> list[NotebookEntry]:
    raw = yaml.safe_load((NOTEBOOKS / "manifest.yaml").read_text())
    return [NotebookEntry(number=str(e["name"])[:2], name=e["name"], title=e["title"], needs_gpu=e["needs_gpu"],
                          cpu_minutes=float(e["cpu_minutes"]), gpu_minutes=float(e["gpu_minutes"]))
            for e in raw["notebooks"]]


def select(entries: list[NotebookEntry], only: list[str] | None) -> list[NotebookEntry]:
    """Filter by number ("01", "3") or name; unknown selectors raise ValueError naming them."""
    if not only:
        return entries
    wanted = {o.strip().zfill(2) if o.strip().isdigit() else o.strip() for o in only if o.strip()}
    chosen = [e for e in entries if e.number in wanted or e.name in wanted]
    known = {e.number for e in entries} | {e.name for e in entries}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"argument --only: expected notebook numbers or names ({', '.join(e.number for e in entries)}), "
                         f"found {', '.join(map(repr, unknown))}")
    return chosen


def parse_value(text: str) -> Any:
    """``-p`` value parsing: a Python literal (1, 0.5, True, None, [1, 2], 'x') or else a plain string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"argument -p: expected key=value, found {item!r}")
        key, value = item.split("=", 1)
        if not key.strip():
            raise ParameterError(f"argument -p: expected key=value with a parameter name, found {item!r}")
        out[key.strip()] = parse_value(value)
    return out


_TYPE_NAMES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "list": (list, tuple),
               "dict": (dict,), "NoneType": (type(None),)}


def _type_ok(value: Any, inferred: str) -> bool:
    if inferred in ("None", "NoneType"):  # default None: any value allowed
        return True
    allowed = _TYPE_NAMES.get(inferred)
    if allowed is None:
        return True
    if isinstance(value, bool) and inferred in ("int", "float"):
        return False
    return isinstance(value, allowed)


def _declared_type(spec: dict[str, Any]) -> str:
    """The parameter's type: its annotation if papermill found one, else the type of its literal default."""
    inferred = spec.get("inferred_type_name") or "None"
    if inferred not in ("None", "NoneType"):
        return inferred
    try:
        return type(ast.literal_eval(spec["default"])).__name__
    except (ValueError, SyntaxError):
        return "None"  # a non-literal default: accept any value


_BOUND = re.compile(r"\((at least|more than) (-?[\d.]+)\)\s*$")


def _bound(help_text: str) -> tuple[str, float] | None:
    """A parameter's lower bound, written at the end of its help comment as "(at least 1)" or "(more than 0)"
    (papermill's parameter parser rejects a comment with "=" in it). Returns (">=" or ">", bound)."""
    m = _BOUND.search(help_text)
    return ({"at least": ">=", "more than": ">"}[m.group(1)], float(m.group(2))) if m else None


def _within(value: Any, op: str, bound: float) -> bool:
    if isinstance(value, list):
        return all(_within(v, op, bound) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True  # the type check speaks for non-numbers
    return value >= bound if op == ">=" else value > bound


def notebook_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """The parameters cell's names -> {inferred_type_name, default, help} (papermill's inspector). A notebook
    that cannot be read raises ParameterError naming the file."""
    import papermill

    try:
        return papermill.inspect_notebook(str(path))
    except Exception as exc:  # noqa: BLE001 - nbformat/json/papermill each raise their own kind
        raise ParameterError(f"{path}: not a readable notebook ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else 'no detail'})") from None


def plan_parameters(entries: list[NotebookEntry], profile: Profile, overrides: dict[str, Any],
                    run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per-notebook parameters after checking every name, type and bound, then each notebook's values by the
    library's own rules (``notebook_checks``); raises ParameterError (or NotebookParameterError) naming the
    culprit."""
    declared = {e.name: notebook_parameters(e.path) for e in entries}
    all_names = set().union(*(d.keys() for d in declared.values())) if declared else set()
    for key in overrides:
        if key not in all_names:
            raise ParameterError(f"argument -p {key}: expected a parameter a selected notebook declares "
                                 f"({', '.join(sorted(all_names))}), found unknown parameter {key!r}")
    plan: dict[str, dict[str, Any]] = {}
    for e in entries:
        decl = declared[e.name]
        params: dict[str, Any] = {}
        for key, value in profile.params_for(e.number).items():
            if key not in decl:
                if key in profile.notebooks.get(e.number, {}):
                    raise ParameterError(f"profile {profile.name!r}: notebook {e.name} has no parameter {key!r} "
                                         f"(it declares {sorted(decl)})")
                continue  # a 'common' key this notebook does not use
            params[key] = value
        params.update({k: v for k, v in overrides.items() if k in decl})
        if "run_dir" in decl:
            params["run_dir"] = str(run_dir)
        if "profile" in decl:
            params["profile"] = profile.name
        for key, value in params.items():
            inferred = _declared_type(decl[key])
            if not _type_ok(value, inferred):
                raise ParameterError(f"parameter {key!r} of {e.name}: expected {inferred} (default "
                                     f"{decl[key]['default']}), found {type(value).__name__} {value!r}")
            bound = _bound(decl[key].get("help") or "")
            if bound and not _within(value, *bound):
                raise ParameterError(f"parameter {key!r} of {e.name}: expected {bound[0]} {bound[1]:g}"
                                     f"{' for every element' if isinstance(value, list) else ''}, found {value!r}")
        notebook_checks.check(e.name, {k: _default(spec) for k, spec in decl.items()} | params)
        plan[e.name] = params
    return plan


def _default(spec: dict[str, Any]) -> Any:
    """A parameter's default as a value (papermill gives its source text; a non-literal one stays text)."""
    try:
        return ast.literal_eval(spec["default"])
    except (ValueError, SyntaxError):
        return spec["default"]


@dataclass
class NotebookOutcome:
    """What happened to one notebook. ``status``: passed | passed-with-skips | failed | interrupted | not-run."""

    notebook: str
    status: str
    duration_s: float = 0.0
    error: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    output: str | None = None


def _outcome_from_results(name: str, duration: float, output: Path, run_dir: Path) -> NotebookOutcome:
    res = load_results(run_dir, name)
    if res is None:
        return NotebookOutcome(name, "failed", duration, error="notebook wrote no results JSON", output=str(output))
    failed = [c for c in res.get("checks", []) if not c.get("ok", False)]
    if failed:
        return NotebookOutcome(name, "failed", duration, error=f"checks failed: {[c['name'] for c in failed]}",
                               figures=res.get("figures", {}), skipped=res.get("skipped", []), output=str(output))
    status = "passed-with-skips" if res.get("skipped") else "passed"
    return NotebookOutcome(name, status, duration, figures=res.get("figures", {}), skipped=res.get("skipped", []),
                           output=str(output))


def _ipc_kernel_manager(folder: Path, log: Path):
    """A kernel manager whose kernels talk over IPC sockets in ``folder`` instead of loopback TCP (nothing listens on
    the network, and ipykernel no longer warns, at every start, that TCP is unencrypted) and write their own stdout
    and stderr to ``log`` (a kernel shut down mid-cell by Ctrl-C logs its closed sockets there, not on the
    terminal)."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self):
            return "ipc"

        @default("ip")
        def _ip_default(self):
            return str(folder / "kernel")

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            out = log.open("a")
            kw["stdout"], kw["stderr"] = out, out
            try:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            finally:
                out.close()  # the kernel holds its own copy of the descriptor

    return IPCKernelManager


class _DeadKernelAfterCtrlC(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" report of nbclient's cell task ending in DeadKernelError.
    After Ctrl-C the runner shuts the kernel down while that background task still waits on it; asyncio reports the
    task's exception only when it is garbage-collected, as a traceback on stderr, for an interrupt the run's summary
    already states. Installed only once a run has been interrupted; every other asyncio record passes."""

    def __init__(self) -> None:
        super().__init__()
        from nbclient.exceptions import DeadKernelError  # bound now: the report may come at interpreter shutdown

        self.dead = DeadKernelError

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, self.dead) and record.getMessage().startswith("Task exception was never"))

    @classmethod
    def install(cls) -> None:
        """On asyncio's logger, once per process."""
        log = logging.getLogger("asyncio")
        if not any(isinstance(f, cls) for f in log.filters):
            log.addFilter(cls())


def execute(entries: list[NotebookEntry], profile: Profile, overrides: dict[str, Any], out_dir: Path | None = None,
            progress: bool = True, timeout_s: int | None = None) -> tuple[Path, list[NotebookOutcome]]:
    """Run the notebooks in order; stop at the first failure. Returns the run dir and per-notebook outcomes. Ctrl-C
    or a broken pipe (``kdtree-lab run ... | head``) at any point still writes the summary, which names the notebook
    it stopped and those not run; a broken pipe is raised again after it (nobody reads the terminal)."""
    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from ..core.display import console as display_console

    console = display_console(stderr=True)
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + f"-{profile.name}"
    run_dir = Path(out_dir).resolve() if out_dir else RUNS / run_id  # relative: against the caller's directory
    run_dir.mkdir(parents=True, exist_ok=True)
    plan = plan_parameters(entries, profile, overrides, run_dir)
    outcomes: list[NotebookOutcome] = []
    failed = False  # set by the notebook that stops the run; those after it name it
    broken = None  # the BrokenPipeError that ended the run, raised again once the summary is written
    previous = os.environ.get(HEADLESS_ENV)
    os.environ[HEADLESS_ENV] = "1"  # the kernels inherit it: plain-text progress (display.headless)
    sockets_dir = tempfile.TemporaryDirectory(prefix="kdtree-kernels-")  # the kernels' IPC sockets
    manager = _ipc_kernel_manager(Path(sockets_dir.name), run_dir / "kernels.log")
    try:
        for i, e in enumerate(entries, 1):
            output = run_dir / f"{e.name}.ipynb"
            if failed:
                stopper = next(o for o in outcomes if o.status in ("failed", "interrupted"))
                outcomes.append(NotebookOutcome(e.name, "not-run", error=f"{stopper.notebook} {stopper.status} "
                                                                          "before it"))
                continue
            announce(console, i, len(entries), e, profile.name)
            t0 = time.perf_counter()
            try:
                papermill.execute_notebook(str(e.path), str(output), parameters=plan[e.name], kernel_name="python3",
                                           progress_bar=progress, cwd=str(e.path.parent), execution_timeout=timeout_s,
                                           kernel_manager_class=manager)
                outcome = _outcome_from_results(e.name, time.perf_counter() - t0, output, run_dir)
            except DeadKernelError as exc:
                outcome = NotebookOutcome(e.name, "failed", time.perf_counter() - t0, output=str(output),
                                          error=f"kernel died (out of memory or a crash; papermill exit 138): {exc}")
            except papermill.PapermillExecutionError as exc:
                outcome = NotebookOutcome(e.name, "failed", time.perf_counter() - t0, output=str(output),
                                          error=f"cell {exc.cell_index} of the output notebook (execution count "
                                                f"{exc.exec_count}, starting {_first_line(exc.source)!r}): "
                                                f"{exc.ename}: {exc.evalue}")
            except CellTimeoutError:
                where = mark_stopped(output, f"timed out after {timeout_s} s (--cell-timeout)")
                outcome = NotebookOutcome(e.name, "failed", time.perf_counter() - t0, output=str(output),
                                          error=f"{where} ran past the {timeout_s} s cell timeout (--cell-timeout)")
            except (KeyboardInterrupt, BrokenPipeError) as exc:
                _DeadKernelAfterCtrlC.install()
                why = STOPPED_BY[type(exc)]
                where = mark_stopped(output, f"interrupted ({why})")
                outcome = NotebookOutcome(e.name, "interrupted", time.perf_counter() - t0, output=str(output),
                                          error=f"{why} in {where}")
                if isinstance(exc, BrokenPipeError):
                    broken = exc
            outcomes.append(outcome)
            if outcome.status == "interrupted":  # the command says it once, with the summary
                failed = True
                continue
            colour = {"passed": "green", "passed-with-skips": "yellow"}.get(outcome.status, "red")
            console.print(f"    [{colour}]{outcome.status}[/{colour}] in {outcome.duration_s:.1f} s"
                          + (f": {outcome.error}" if outcome.error else "")
                          + (f" ({len(outcome.skipped)} skipped)" if outcome.skipped else ""))
            failed = outcome.status in ("failed", "interrupted")
    except (KeyboardInterrupt, BrokenPipeError) as exc:  # between notebooks: the line a notebook starts or ends with
        done = {o.notebook for o in outcomes}
        current = next((e for e in entries if e.name not in done), None)
        if current is not None:
            outcomes.append(NotebookOutcome(current.name, "interrupted", error=f"{STOPPED_BY[type(exc)]} before it "
                                            "started", output=str(run_dir / f"{current.name}.ipynb")))
            _DeadKernelAfterCtrlC.install()
        if isinstance(exc, BrokenPipeError):
            broken = exc
    finally:  # this process's own environment and temporary folder as they were; no empty kernels.log left behind
        sockets_dir.cleanup()
        log = run_dir / "kernels.log"
        if log.exists() and log.stat().st_size == 0:
            log.unlink()
        if previous is None:
            os.environ.pop(HEADLESS_ENV, None)
        else:
            os.environ[HEADLESS_ENV] = previous
    stopper = next((o for o in outcomes if o.status == "interrupted"), None)
    outcomes += [NotebookOutcome(e.name, "not-run", error=f"{stopper.notebook} interrupted before it")
                 for e in entries[len(outcomes):]] if stopper else []
    write_summary(run_dir, profile, outcomes)
    if broken is not None:  # nobody reads the terminal any more: the summary is on disk, the command ends quietly
        raise broken
    return run_dir, outcomes


STOPPED_BY = {KeyboardInterrupt: "Ctrl-C", BrokenPipeError: "a broken pipe (the reader of the run's output went away)"}


def announce(console, i: int, n: int, entry: NotebookEntry, profile: str) -> None:
    """The line a notebook starts with, ``[4/8] 03_eager_parity (profile cpu): Eager parity of ...``, kept to one
    terminal line: a title too long for it ends in an ellipsis instead of wrapping."""
    from rich.text import Text

    line = Text.assemble((f"[{i}/{n}]", "bold"), f" {entry.name} (profile {profile}): ", (entry.title, "dim"))
    console.print(line, no_wrap=True, overflow="ellipsis", crop=True)


def mark_stopped(path: Path, why: str) -> str:
    """Make a partial output notebook say where the run stopped: the last code cell papermill started is marked
    ``running``, the cells after it ``pending`` (papermill's own clean-up marks them "completed" when a run ends
    early), and a markdown note goes right before it. Returns "cell N of the output notebook (starting ...)" (N
    counts the note), or "the notebook" when the file is missing, unreadable or never started a cell."""
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001 - a missing or half-written file: nothing to mark
        return "the notebook"
    started = [i for i, c in enumerate(nb.cells)
               if c.cell_type == "code" and c.get("metadata", {}).get("papermill", {}).get("start_time")]
    if not started:
        return "the notebook"
    stopped = started[-1]
    for i in range(stopped, len(nb.cells)):
        meta = nb.cells[i].setdefault("metadata", {}).setdefault("papermill", {})
        meta["status"] = "running" if i == stopped else "pending"
    note = nbformat.v4.new_markdown_cell(f"**kdtree-lab: the run stopped in the next cell**: {why}. It and the cells "
                                         "after it did not finish; their outputs, if any, are partial.")
    note.metadata["tags"] = ["kdtree-lab-stopped"]
    nb.cells.insert(stopped, note)
    nbformat.write(nb, str(path))
    return f"cell {stopped + 1} of the output notebook (starting {_first_line(nb.cells[stopped + 1].source)!r})"


def _first_line(source: str) -> str:
    lines = [ln for ln in (source or "").splitlines() if ln.strip()]
    return lines[0][:80] if lines else ""


def summary_table(profile: str, run_dir: Path, outcomes: list[NotebookOutcome]):
    """The run's summary for a terminal, for ``rich.console.Console().print``: a table of each notebook's status,
    seconds and what it skipped or why it did not pass (a long error cut: the command prints it whole after), a
    table of the key figures (one a row, so both read at 80 columns), and the notes."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from .report import notes

    colour = {"passed": "green", "passed-with-skips": "yellow", "not-run": "dim"}
    table = Table(title=f"kdtree-lab run ({profile}): {run_dir}", title_justify="left", box=box.SIMPLE_HEAD)
    for name, kw in (("notebook", {"no_wrap": True}), ("status", {"no_wrap": True}),
                     ("seconds", {"justify": "right", "no_wrap": True}),
                     ("skipped here, or why not passed", {"overflow": "fold"})):
        table.add_column(name, **kw)
    figures = Table(title="key figures", title_justify="left", box=box.SIMPLE_HEAD)
    for name, kw in (("notebook", {"no_wrap": True}), ("figure", {}), ("value", {"overflow": "fold"})):
        figures.add_column(name, **kw)
    for o in outcomes:
        error = o.error if not o.error or len(o.error) <= 100 else o.error[:100].rstrip() + "... (whole below)"
        why = error or "; ".join(f"{s['what']} ({s['why']})" for s in o.skipped) or "-"
        table.add_row(o.notebook, Text(o.status, style=colour.get(o.status, "red")),
                      "-" if o.status == "not-run" else f"{o.duration_s:,.1f}", why)
        for i, (k, v) in enumerate(o.figures.items()):
            figures.add_row(o.notebook if i == 0 else "", k, fmt(v))
    parts = [table] + ([figures] if figures.row_count else [])
    return Group(*parts, *(Text(n) for n in notes(outcomes)))


def write_summary(run_dir: Path, profile: Profile, outcomes: list[NotebookOutcome]) -> None:
    """``summary.json`` and ``summary.md``: one row per notebook with status, duration and key figures."""
    doc = {"profile": profile.name, "run_dir": str(run_dir), "notebooks": [asdict(o) for o in outcomes],
           "all_passed": all(o.status == "passed" for o in outcomes),
           "any_failed": any(o.status == "failed" for o in outcomes),
           "interrupted": any(o.status == "interrupted" for o in outcomes)}
    (run_dir / "summary.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    lines = [f"# kdtree-lab run ({profile.name})", "", f"Run directory: `{run_dir}`", "",
             "| notebook | status | seconds | key figures | skipped |", "|---|---|---:|---|---|"]
    for o in outcomes:
        figs = "; ".join(f"{k}={fmt(v)}" for k, v in o.figures.items()) or "-"
        skipped = "; ".join(f"{s['what']} ({s['why']})" for s in o.skipped) or "-"
        status = o.status + (f": {o.error}" if o.error else "")
        lines.append(f"| {o.notebook} | {status} | {o.duration_s:.1f} | {figs} | {skipped} |")
    from .report import notes, write_index

    for note in notes(outcomes):
        lines += ["", note]
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")
    write_index(run_dir, profile.name, outcomes)
