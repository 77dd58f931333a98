"""Where a kernel's warps spend their time, by phase: Nsight Compute's per-SASS warp-stall samples (``ncu -i REP
--page source --csv --print-source sass``, gzipped or not) grouped by how often each instruction ran.

Instructions that ran the same number of times belong to the same phase of the kernel (a prologue every warp runs
once, a loop, an epilogue one role runs); the table gives each count's share of the samples and its top stall
reasons. Prints a markdown table; a development tool for kernel work (docs/performance.md quotes its output).
``--instructions N`` lists instead, in address order, every instruction that ran at least N times (a loop's body,
each one with its samples and its two largest stall reasons): where inside a phase the warps wait. ``--mma-split N``
splits the phase of instructions that ran exactly N times (a loop's body) around its tensor-core MMAs
(sass_census.MMA_OPS): the samples before the first, on the MMAs, on the other instructions between them and after
the last, and the MMAs' stall reasons: whether a loop is its MMAs' issue or the code around them.

    python3 scripts/ncu_phases.py data/results/h200/2026-12-01-split-floor/call2-ncu-short/roles-short-sass.csv.gz
    python3 scripts/ncu_phases.py FILE.source.csv.gz --instructions 90000
    python3 scripts/ncu_phases.py FILE.source.csv.gz --mma-split 50000
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sass_census import MMA_OPS, opcode, unguarded  # noqa: E402


def _instructions(text: str) -> list[dict]:
    """Each SASS instruction of the export, in its order: address, source text, executions, samples and the samples
    per stall reason (issued or not)."""
    rows = list(csv.reader(io.StringIO(text)))
    head = next(i for i, r in enumerate(rows) if "Warp Stall Sampling (All Samples)" in r)
    hdr, data = rows[head], rows[head + 1:]
    i_s, i_e = hdr.index("Warp Stall Sampling (All Samples)"), hdr.index("Instructions Executed")
    i_a, i_src = hdr.index("Address"), hdr.index("Source")
    stalls = [(h[len("stall_"):], i) for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    out = []
    for r in data:
        if len(r) <= max(i_s, i_e) or not r[i_e].strip().isdigit():
            continue
        out.append({"address": r[i_a], "source": r[i_src].strip(), "executed": int(r[i_e]),
                    "samples": int(r[i_s] or 0),
                    "stalls": collections.Counter({n: int(r[i]) for n, i in stalls if r[i].strip().isdigit()})})
    return out


def _top(stalls: collections.Counter, k: int) -> str:
    """The ``k`` largest stall reasons with their samples, "name count, ..." (reasons with none left out)."""
    return ", ".join(f"{n} {c}" for n, c in stalls.most_common(k) if c)


def loop_instructions(text: str, min_executed: int) -> list[dict]:
    """The instructions that ran at least ``min_executed`` times, in address order, each with its samples and its
    two largest stall reasons (``top_stalls``)."""
    return [{"address": x["address"], "source": x["source"], "executed": x["executed"], "samples": x["samples"],
             "top_stalls": _top(x["stalls"], 2)}
            for x in _instructions(text) if x["executed"] >= min_executed]


def _is_mma(source: str) -> bool:
    """Whether a SASS line (its predicate, if any, first) is a tensor-core MMA (sass_census.MMA_OPS)."""
    return opcode(unguarded(source)) in MMA_OPS


def mma_split(text: str, executed: int) -> dict | None:
    """The instructions that ran exactly ``executed`` times, split around their MMAs: per part (``before`` the first
    MMA, the ``mma`` themselves, the ``between`` others, ``after`` the last) its instructions and samples, and the
    MMAs' samples per stall reason (``mma_stalls``, largest first). None where that phase has no MMA."""
    body = [x for x in _instructions(text) if x["executed"] == executed]
    at = [i for i, x in enumerate(body) if _is_mma(x["source"])]
    if not at:
        return None
    parts = {"before": body[:at[0]], "mma": [body[i] for i in at],
             "between": [x for x in body[at[0]:at[-1] + 1] if not _is_mma(x["source"])], "after": body[at[-1] + 1:]}
    stalls: collections.Counter = collections.Counter()
    for x in parts["mma"]:
        stalls.update(x["stalls"])
    return {"executed": executed, "parts": {k: {"instructions": len(v), "samples": sum(x["samples"] for x in v)}
                                            for k, v in parts.items()},
            "mma_stalls": [(n, c) for n, c in stalls.most_common() if c]}


def phases(text: str, top: int = 8) -> list[dict]:
    """Per execution count (instructions executed per instruction), its instructions, samples, share of all
    samples and the three largest stall reasons, largest share first; at most ``top`` rows."""
    by: dict[int, dict] = {}
    for x in _instructions(text):
        d = by.setdefault(x["executed"], {"instructions": 0, "samples": 0, "stalls": collections.Counter()})
        d["instructions"] += 1
        d["samples"] += x["samples"]
        d["stalls"].update(x["stalls"])
    total = sum(d["samples"] for d in by.values()) or 1
    out = [{"executed": e, "instructions": d["instructions"], "samples": d["samples"], "share": d["samples"] / total,
            "top_stalls": _top(d["stalls"], 3)}
           for e, d in by.items()]
    return sorted(out, key=lambda x: -x["samples"])[:top]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path, help="the --page source --csv export (.csv or .csv.gz)")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--instructions", type=int, metavar="N",
                    help="list each instruction executed at least N times, in address order, instead of the phases")
    ap.add_argument("--mma-split", type=int, metavar="N",
                    help="split the instructions executed exactly N times around their MMAs instead of the phases")
    a = ap.parse_args(argv)
    if not a.csv.is_file():
        print(f"csv: expected an ncu source-page export, found no file at {a.csv}", file=sys.stderr)
        return 2
    raw = a.csv.read_bytes()
    text = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
    if a.mma_split is not None:
        split = mma_split(text, a.mma_split)
        if split is None:
            print(f"--mma-split: expected MMAs ({', '.join(MMA_OPS)}) among the instructions executed {a.mma_split} "
                  f"times in {a.csv}, found none", file=sys.stderr)
            return 2
        total = sum(v["samples"] for v in split["parts"].values()) or 1
        mma = split["parts"]["mma"]["samples"] or 1
        print("| part | instructions | samples | share |")
        print("|---|---:|---:|---:|")
        for k, v in split["parts"].items():
            print(f"| {k} | {v['instructions']:,} | {v['samples']:,} | {v['samples'] / total:.0%} |")
        print()
        print("MMA stalls: " + ", ".join(f"{n} {c} ({c / mma:.0%})" for n, c in split["mma_stalls"]))
        return 0
    if a.instructions is not None:
        listed = loop_instructions(text, a.instructions)
        if not listed:
            print(f"--instructions: expected instructions executed at least {a.instructions} times in {a.csv}, "
                  "found none", file=sys.stderr)
            return 2
        print("| address | executed | samples | SASS | top stalls |")
        print("|---|---:|---:|---|---|")
        for r in listed:
            sass = r["source"].replace("|", "\\|")
            print(f"| {r['address']} | {r['executed']:,} | {r['samples']:,} | `{sass}` | {r['top_stalls']} |")
        return 0
    rows = phases(text, a.top)
    if not rows:
        print(f"csv: {a.csv} holds no per-instruction warp-stall samples", file=sys.stderr)
        return 2
    print("| instructions executed (each) | instructions | samples | share | top stalls |")
    print("|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['executed']:,} | {r['instructions']:,} | {r['samples']:,} | {r['share']:.0%} | {r['top_stalls']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
