"""``kdtree-lab run``: the notebook sequence headless, on one GPU or on every GPU of a fleet."""

from __future__ import annotations

import argparse
import sys

from .args import FAILED, INTERRUPTED, OK, AnswerNo, BadArgument, bounded_int, check_fleet_flags, fleet_flags, \
    fleet_labels, non_empty


def cmd_run(args: argparse.Namespace) -> int:
    """Every argument and -p value checked before the first notebook (exit 2; a GPU profile without a GPU: exit
    3); then the notebooks, exit 0 when each passed, 1 when one failed, 130 on Ctrl-C (the run's summary is
    written either way, and when the reader of its output goes away)."""
    from pathlib import Path

    from ..lab import runner
    from ..lab.profiles import resolve

    check_fleet_flags(args)
    try:
        profile = resolve(args.profile)
        only = args.only.split(",") if args.only is not None else None
        if only is not None and not any(o.strip() for o in only):
            raise ValueError(f"argument --only: expected notebook numbers or names, found {args.only!r}")
        entries = runner.select(runner.manifest(), only)
        overrides = runner.parse_overrides(args.param or [])
        # Names, types, bounds and the library's own rules before anything runs (execute() checks again with the
        # real run dir).
        runner.plan_parameters(entries, profile, overrides, Path(args.out or "runs/check").resolve())
    except ValueError as exc:
        raise BadArgument(str(exc)) from None
    if profile.gpu and args.profile != "auto":
        import torch

        if not torch.cuda.is_available():
            raise AnswerNo(f"--profile {profile.name}: expected a CUDA GPU, found none on this machine (--profile "
                           "auto picks cpu here)")
    if args.out:
        args.out = str(Path(args.out).resolve())  # relative: against the caller's directory, not notebooks/
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / ".write-check").touch()
            (out / ".write-check").unlink()
        except OSError as exc:
            raise BadArgument(f"argument --out {args.out}: expected a writable directory, found "
                              f"{(exc.strerror or str(exc)).lower()}") from None
    if args.gpus:
        return _run_fleet(args, entries, profile, overrides)
    progress = not args.no_progress and sys.stderr.isatty()  # papermill's bar is one long \r line in a log
    run_dir, outcomes = runner.execute(entries, profile, overrides, Path(args.out) if args.out else None,
                                       progress=progress, timeout_s=args.cell_timeout)
    from ..core.display import console

    console(highlight=False).print(runner.summary_table(profile.name, run_dir, outcomes))
    print(f"the run as HTML: {run_dir / 'index.html'}")
    for o in outcomes:
        if o.status == "failed":
            print(f"kdtree-lab run: notebook {o.notebook} failed: {o.error}; partial output kept at {o.output}",
                  file=sys.stderr)
        elif o.status == "interrupted":
            print(f"kdtree-lab run: notebook {o.notebook} interrupted by {o.error}; partial output kept at {o.output}",
                  file=sys.stderr)
    if any(o.status == "interrupted" for o in outcomes):
        return INTERRUPTED
    return FAILED if any(o.status == "failed" for o in outcomes) else OK


def _run_fleet(args: argparse.Namespace, entries, profile, overrides) -> int:
    """The notebook sequence once per GPU (run_dir/gpu-<label>), then one comparison of the GPUs."""
    import datetime
    import json
    from pathlib import Path

    from ..core.display import aligned_table, markdown_table
    from ..core.paths import RUNS
    from ..lab import fleet

    labels = fleet_labels(args)
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
    print(f"kdtree-lab run on {len(labels)} GPUs ({profile.name}): {run_dir}\n\n" + aligned_table(rep.summary())
          + "\n\n" + aligned_table([{"notebook": r["notebook"], "figure": r["figure"],
                                      **{f"GPU {g}": v for g, v in r["values"].items()},
                                      "outlier": "yes" if r["outlier"] else ""} for r in table]))
    for o in rep.outcomes:
        if o.error:
            print(f"kdtree-lab run: GPU {o.gpu}: {o.error}; the run is incomplete", file=sys.stderr)
    bad = [r for r in rep.rows if r["status"] not in ("passed", "passed-with-skips")]
    return OK if rep.complete and not bad else FAILED


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("run", help="execute the notebook sequence headless through papermill")
    p.add_argument("--profile", default="auto", help="profile name under data/profiles, or 'auto' (by GPU)")
    p.add_argument("--only", type=non_empty("notebook numbers or names"),
                   help="comma-separated notebook numbers or names, e.g. 01,03 (default: every notebook)")
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                   help="override a notebook parameter (Python literal or string); repeatable")
    p.add_argument("--out", type=non_empty("a run directory"),
                   help="run directory (default runs/<timestamp>-<profile>)")
    p.add_argument("--no-progress", action="store_true",
                   help="hide the per-cell progress bar (hidden anyway when stderr is not a terminal)")
    p.add_argument("--cell-timeout", type=bounded_int(1), default=None, help="seconds allowed per cell (default: none)")
    fleet_flags(p)
    p.set_defaults(func=cmd_run)
