"""How fast one SM stores a CTA's partial rows, by store pattern (issue 52, the fixed cost): builds
scripts/store_patterns.cu for this GPU with nvcc, runs it, writes its JSON and prints a table. Patterns and what they
test: the .cu file's header. Needs a GPU (and nvcc); the build alone runs anywhere (tests/test_store_patterns.py).

    python scripts/store_patterns.py --out store-patterns.json [--reps 65] [--launches 25]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kdtree_lab.core.cuda_tools import build_benchmark, run_benchmark  # noqa: E402

SOURCE = Path(__file__).with_suffix(".cu")


def build(arch: str, out: Path, nvcc: str | None = None) -> Path:
    """nvcc of store_patterns.cu for ``arch`` (``sm_90a``, ``sm_120a``) into the executable ``out``."""
    return build_benchmark(SOURCE, arch, out, nvcc)


def table(result: dict) -> str:
    """One line a (pattern, grid): the time of a rep and bytes a cycle a SM."""
    lines = [f"{result['gpu']}, {result['sms']} SMs, {result['sm_clock_khz'] / 1e6:.2f} GHz, "
             f"{result['reps']} reps a launch, median of {result['launches']} launches"]
    for r in result["rows"]:
        grid = "every SM" if r["ctas"] == result["sms"] else f"{r['ctas']} CTA"
        lines.append(f"  {r['pattern']:9} {grid:9} {r['bytes_per_cta'] // 1024:4} KB a CTA  {r['rep_us']:7.3f} us a rep  "
                     f"{r['bytes_per_clk_per_sm']:6.1f} B/clk/SM")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON result")
    ap.add_argument("--reps", type=int, default=65, help="reps a launch (>= 2; a rep's time is the slope)")
    ap.add_argument("--launches", type=int, default=25, help="timed launches per point (the median is kept)")
    a = ap.parse_args(argv)
    if a.reps < 2 or a.launches < 1:
        ap.error(f"--reps >= 2 and --launches >= 1 expected, found {a.reps} and {a.launches}")
    result = run_benchmark(SOURCE, [str(a.reps), str(a.launches)])
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
