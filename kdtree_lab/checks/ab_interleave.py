"""Two builds of the library timed in one process, their graph replays interleaved: the A/B of a kernel patch.

A change worth 0.3-2 us is within the spread of single graph-replay medians taken a minute apart (B = 1, L = 32k
shapes have moved 3 us between steps on unchanged code: data/results/h100/2026-12-06-stack-landing-grid-and-stack-ab/,
calls 6 and 7). Here both builds (``--lib-a``, ``--lib-b``: a library's path, or the ``kdtree_lab build --json`` file
that names it) are opened side by side (``loader.use_library``), each captures one CUDA graph per input copy of a
shape over the same inputs, and the rounds alternate A, B / B, A, ``iters`` event-timed replays each, so drift of
clocks and temperature falls on both. Per shape: each build's median, the per-round difference B - A and its median,
the rounds in which B was faster, and whether the two wrote the same output bits (one eager call each on the same
poisoned output; a row left unwritten is named). Exit 1 where the bits differ or a row is unwritten, 2 on a bad
argument or a library that does not load. On a GPU:

    python3 -m kdtree_lab.checks.ab_interleave --lib-a build-main.json --lib-b build-patch.json \\
        --impl cuda_sm120_e4m3 --shape 1,32768,16,16,fp8 --rounds 10 --out ab.json

No library is built here: the paths name them (a timing library is one that `kdtree_lab build --json` built under
``KDT_E4M3_TIMING=1``; the run scripts' ``build_libs`` writes both kinds' JSON for main and a patch).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from .roofline import Shape, parse_shape


def library_path(arg: str | Path) -> Path:
    """The library a ``--lib-*`` argument names: a ``.so`` path, or a ``kdtree_lab build --json`` file (its
    ``build.library``). ValueError in one line otherwise."""
    path = Path(arg)
    if path.suffix == ".json":
        try:
            lib = json.loads(path.read_text())["build"]["library"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: expected a `kdtree_lab build --json` file naming build.library ({exc})")
        return Path(lib)
    if path.suffix != ".so":
        raise ValueError(f"{path}: expected a library (.so) or a `kdtree_lab build --json` file (.json)")
    return path


@dataclass(frozen=True)
class Summary:
    """One shape's comparison (times in microseconds)."""

    median_a_us: float
    median_b_us: float
    round_diffs_us: list[float]  # per round: B's median - A's median
    median_diff_us: float
    rounds_b_faster: int
    rounds: int

    @property
    def change(self) -> float:
        """B against A, as a fraction of A's median (negative: B faster)."""
        return self.median_diff_us / self.median_a_us


def summarize(samples_a: list[list[float]], samples_b: list[list[float]]) -> Summary:
    """The comparison of per-round sample lists (ms, one list per round for each build, in round order)."""
    if not samples_a or len(samples_a) != len(samples_b) or not all(samples_a) or not all(samples_b):
        raise ValueError(f"samples: expected the same number (>= 1) of non-empty rounds for A and B, found "
                         f"{len(samples_a)} and {len(samples_b)}")
    med_a = [statistics.median(r) * 1e3 for r in samples_a]
    med_b = [statistics.median(r) * 1e3 for r in samples_b]
    diffs = [b - a for a, b in zip(med_a, med_b)]
    return Summary(statistics.median([x * 1e3 for r in samples_a for x in r]),
                   statistics.median([x * 1e3 for r in samples_b for x in r]), [round(d, 3) for d in diffs],
                   statistics.median(diffs), sum(d < 0 for d in diffs), len(diffs))


def _sides(lib_a: Path, lib_b: Path) -> dict:
    """Both builds opened for the running GPU's arch (loader.KernelLoadError, a RuntimeError, naming what is missing)."""
    import torch

    from ..kernels import loader

    if not torch.cuda.is_available():
        raise RuntimeError("the builds are timed on a CUDA GPU; found none here")
    arch = loader.gpu_arch()
    return {"A": loader.open_library(lib_a, require_arch=arch), "B": loader.open_library(lib_b, require_arch=arch)}


def measure(libs: dict, impl: str, shape: Shape, rounds: int, iters: int, nsplit: int = 0) -> dict:
    """Capture each build's graphs of ``shape`` under ``impl`` over the same inputs, check their output bits, then
    time ``rounds`` alternating rounds of ``iters`` replays each. Returns the JSON row."""
    import torch

    from ..kernels import loader
    from ..kernels.attention import VerifyAttention, batch_args
    from .bench import _copies, shape_batches
    from .timing import capture_graphs, event_samples_ms

    copies = _copies(shape)
    batches = shape_batches(shape, copies)
    args = [batch_args(b) for b in batches]
    graphs, bits, unwritten, plans, attns = {}, {}, {}, {}, {}
    for tag, lib in libs.items():
        with loader.use_library(lib):
            # kept until the timing ends: its workspace is what the graphs captured
            attn = attns[tag] = VerifyAttention(shape.batch, shape.draft, shape.heads, shape.kv, "cuda", impl,
                                                nsplit=nsplit, batch_sizes=(shape.batch,))
            batches[0].o.fill_(float("nan"))  # poisoned: a row the kernel does not write shows
            attn.run(*args[0])
            torch.cuda.synchronize()
            o = batches[0].o
            unwritten[tag] = bool(o.isnan().any())
            bits[tag] = hashlib.sha256(o.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
            graphs[tag] = capture_graphs(lambda i, attn=attn: attn.run(*args[i]), copies)
            plans[tag] = {"kernel": attn.config(shape.batch).name, "nsplit": attn.nsplit(shape.batch)}
    samples: dict[str, list[list[float]]] = {"A": [], "B": []}
    for r in range(rounds):
        for tag in ("A", "B") if r % 2 == 0 else ("B", "A"):
            graphs[tag][-1].replay()  # one untimed replay after the other build's (the last copy: not the first timed)
            samples[tag].append(event_samples_ms(lambda i, g=graphs[tag]: g[i].replay(), copies, iters))
    s = summarize(samples["A"], samples["B"])
    return {"impl": impl, "B": shape.batch, "L": shape.prefix, "N": shape.draft, "H": shape.heads, "kv": shape.kv,
            "plan_a": plans["A"], "plan_b": plans["B"], "identical": bits["A"] == bits["B"],
            "unwritten_a": unwritten["A"], "unwritten_b": unwritten["B"],
            "median_a_us": round(s.median_a_us, 3), "median_b_us": round(s.median_b_us, 3),
            "median_diff_us": round(s.median_diff_us, 3), "change": round(s.change, 5),
            "round_diffs_us": s.round_diffs_us, "rounds_b_faster": s.rounds_b_faster, "rounds": s.rounds,
            "iters": iters, "copies": copies}


def line(row: dict) -> str:
    """One printed line of a row."""
    return (f"{row['impl']} {row['B']},{row['L']},{row['N']},{row['H']},{row['kv']} nsplit {row['plan_a']['nsplit']}: "
            f"A {row['median_a_us']:.1f} us, "
            f"B {row['median_b_us']:.1f} us, B - A {row['median_diff_us']:+.2f} us ({100 * row['change']:+.1f}%), "
            f"B faster in {row['rounds_b_faster']} of {row['rounds']} rounds, outputs "
            f"{'identical' if row['identical'] else 'DIFFERENT'}"
            + ("".join(f", {t} left rows unwritten (NaN)" for t in "AB" if row[f"unwritten_{t.lower()}"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-a", required=True, help="build A: a library (.so) or its `kdtree_lab build --json` file")
    ap.add_argument("--lib-b", required=True, help="build B, likewise")
    ap.add_argument("--impl", action="append", required=True,
                    help="a CUDA configuration name (kdtree_lab.kernels.impls; repeat or comma-separate)")
    ap.add_argument("--shape", action="append", required=True, help="B,L,N,H[,KV] (repeat)")
    ap.add_argument("--rounds", type=int, default=10, help="alternating rounds (A, B then B, A)")
    ap.add_argument("--iters", type=int, default=20, help="event-timed replays per build and round")
    ap.add_argument("--nsplit", type=int, default=0,
                    help="every shape's split count (0: each shape's automatic one, as SGLang's hook picks it)")
    ap.add_argument("--out", type=Path, help="the rows as JSON")
    a = ap.parse_args(argv)
    try:
        paths = library_path(a.lib_a), library_path(a.lib_b)
        shapes = []
        for text in a.shape:
            try:
                shapes.append(parse_shape(text))
            except ValueError as exc:
                raise ValueError(f"--shape: {exc}")
        if a.rounds < 2 or a.iters < 1:
            raise ValueError(f"--rounds / --iters: expected >= 2 / >= 1, found {a.rounds} / {a.iters}")
        from ..kernels.launch_plan import MAX_NSPLIT

        if not 0 <= a.nsplit <= MAX_NSPLIT:
            raise ValueError(f"--nsplit: expected 0 (automatic) to {MAX_NSPLIT}, found {a.nsplit}")
        impls = [i for arg in a.impl for i in arg.split(",") if i]
        from ..kernels.impls import CUDA_IMPLS

        unknown = [i for i in impls if i not in CUDA_IMPLS]
        if unknown or not impls:
            raise ValueError(f"--impl: expected CUDA configurations ({', '.join(sorted(CUDA_IMPLS))}), found "
                             f"{unknown or impls}")
        from ..kernels.impls import kv_refusal

        for impl in impls:
            for shape in shapes:
                if refusal := kv_refusal(impl, shape.kv):
                    raise ValueError(f"--impl {impl} with --shape ...,{shape.kv}: {refusal}")
        libs = _sides(*paths)
        from ..kernels.impls import sm90a_only
        from ..kernels.loader import gpu_arch

        if (wgmma := [i for i in impls if sm90a_only(i)]) and gpu_arch() != "sm_90a":
            raise ValueError(f"--impl {', '.join(wgmma)}: wgmma configurations run on compute capability 9.x only, "
                             f"found {gpu_arch()}")
    except (ValueError, RuntimeError) as exc:  # RuntimeError: loader.KernelLoadError (missing, wrong arch, ABI)
        print(f"ab_interleave: {exc}", file=sys.stderr)
        return 2
    rows = []
    for impl in impls:
        for shape in shapes:
            row = measure(libs, impl, shape, a.rounds, a.iters, a.nsplit)
            rows.append(row)
            print(line(row), flush=True)
            if a.out:  # after each row: an interrupted run keeps what it measured
                a.out.write_text(json.dumps({"lib_a": str(paths[0]), "lib_b": str(paths[1]), "complete": False,
                                             "rows": rows}, indent=1))
    if a.out:
        a.out.write_text(json.dumps({"lib_a": str(paths[0]), "lib_b": str(paths[1]), "complete": True, "rows": rows},
                                    indent=1))
    bad = [r for r in rows if not r["identical"] or r["unwritten_a"] or r["unwritten_b"]]
    return 1 if bad else 0  # timings stand either way; a difference in the bits is for the caller to read


if __name__ == "__main__":
    sys.exit(main())
