"""``kdtree-lab run``: the notebook sequence headless, on one GPU or on every GPU of a fleet."""

from __future__ import annotations

import argparse
import sys

from .args import bounded_int, fleet_flags, fleet_labels


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..lab import runner
    from ..lab.profiles import resolve

    try:
        profile = resolve(args.profile)
        entries = runner.select(runner.manifest(), args.only.split(",") if args.only else None)
        overrides = runner.parse_overrides(args.param or [])
        # Check names and types before anything runs (execute() checks again with the real run dir).
        runner.plan_parameters(entries, profile, overrides, Path(args.out or "runs/check").resolve())
        if profile.gpu and args.profile != "auto":
            import torch

            if not torch.cuda.is_available():
                raise ValueError(f"--profile {profile.name}: expected a CUDA GPU, found none on this machine "
                                 "(--profile auto picks cpu here)")
        if args.out:
            args.out = str(Path(args.out).resolve())  # relative: against the caller's directory, not notebooks/
            out = Path(args.out)
            try:
                out.mkdir(parents=True, exist_ok=True)
                (out / ".write-check").touch()
                (out / ".write-check").unlink()
            except OSError as exc:
                raise ValueError(f"--out {args.out}: expected a writable directory, found {exc.strerror.lower()}")
    except ValueError as exc:
        print(f"kdtree-lab run: {exc}", file=sys.stderr)
        return 2
    if args.gpus:
        return _run_fleet(args, entries, profile, overrides)
    try:
        run_dir, outcomes = runner.execute(entries, profile, overrides, Path(args.out) if args.out else None,
                                           progress=not args.no_progress, timeout_s=args.cell_timeout)
    except KeyboardInterrupt:  # between notebooks, before a summary could be written
        print("kdtree-lab run: interrupted (Ctrl-C) before the run's summary was written", file=sys.stderr)
        return 130
    from rich.console import Console

    Console(highlight=False).print(runner.summary_table(profile.name, run_dir, outcomes))
    print(f"the run as HTML: {run_dir / 'index.html'}")
    for o in outcomes:
        if o.status == "failed":
            print(f"kdtree-lab run: notebook {o.notebook} failed: {o.error}; partial output kept at {o.output}",
                  file=sys.stderr)
        elif o.status == "interrupted":
            print(f"kdtree-lab run: notebook {o.notebook} interrupted by {o.error}; partial output kept at {o.output}",
                  file=sys.stderr)
    if any(o.status == "interrupted" for o in outcomes):
        return 130
    return 1 if any(o.status == "failed" for o in outcomes) else 0


def _run_fleet(args: argparse.Namespace, entries, profile, overrides) -> int:
    """The notebook sequence once per GPU (run_dir/gpu-<label>), then one comparison of the GPUs."""
    import datetime
    import json
    from pathlib import Path

    from ..core.display import markdown_table
    from ..core.paths import RUNS
    from ..lab import fleet

    labels = fleet_labels(args, "run")
    if labels is None:
        return 2
    run_dir = Path(args.out) if args.out else RUNS / (datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
                                                     + f"-{profile.name}-fleet")
    run_dir.mkdir(parents=True, exist_ok=True)
    rep = fleet.run(entries, profile, overrides, run_dir, labels, args.scheduler, args.cell_timeout)
    table = fleet.compare(rep.rows)
    doc = {"profile": profile.name, "gpus": rep.summary(), "complete": rep.complete, "notebooks": rep.rows,
           "comparison": table}
    (run_dir / "fleet-summary.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    text = (f"# kdtree-lab run on {len(labels)} GPUs ({profile.name})\n\n" + markdown_table(rep.summary())
            + "\n\n" + markdown_table([{"notebook": r["notebook"], "figure": r["figure"],
                                          **{f"GPU {g}": v for g, v in r["values"].items()},
                                          "outlier": "**yes**" if r["outlier"] else ""} for r in table]))
    (run_dir / "fleet-summary.md").write_text(text + "\n")
    print(text)
    for o in rep.outcomes:
        if o.error:
            print(f"kdtree-lab run: GPU {o.gpu}: {o.error}; the run is incomplete", file=sys.stderr)
    bad = [r for r in rep.rows if r["status"] not in ("passed", "passed-with-skips")]
    return 0 if rep.complete and not bad else 1


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("run", help="execute the notebook sequence headless through papermill")
    p.add_argument("--profile", default="auto", help="profile name under data/profiles, or 'auto' (by GPU)")
    p.add_argument("--only", help="comma-separated notebook numbers or names, e.g. 01,03 (default: every notebook)")
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                   help="override a notebook parameter (Python literal or string); repeatable")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-<profile>)")
    p.add_argument("--no-progress", action="store_true", help="hide the per-cell progress bar")
    p.add_argument("--cell-timeout", type=bounded_int(1), default=None, help="seconds allowed per cell (default: none)")
    fleet_flags(p)
    p.set_defaults(func=cmd_run)
