"""Print this folder's tables (README.md) from the calls' bench JSONs: graph-replay medians in ms, and each
setting's change against main in the same call.

    python3 data/results/h200/2026-12-04-e4m3-32-bound/summarize.py
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHAPES = [(1, 200000, 4), (8, 200000, 4), (1, 32768, 4), (8, 32768, 4), (1, 200000, 16), (8, 200000, 16)]
CALLS = [  # folder, file stem, [(file suffix, column)], forms
    ("call1-index-fetch-ahead", "fetch", [("main", "main"), ("p2-0-0", "2 0 0"), ("p1-8-8", "1 8 8"),
                                          ("p2-8-8", "2 8 8")], ["cuda_sm120_e4m3_32", "cuda_sm120_e4m3"]),
    ("call2-load-warps", "load-warps", [("main", "main"), ("patch", "load warpgroup")], ["cuda_sm120_e4m3_32"]),
    ("call3-v-first", "vfirst", [("main", "main"), ("s4-1-1", "4 1 1"), ("s5-0-0", "5 0 0"), ("s5-1-1", "5 1 1")],
     ["cuda_sm120_e4m3_32", "cuda_sm120_e4m3"]),
    ("call4-ablations", "ablate", [(x, x.replace("", "+")[1:-1] if x != "main" else x)
                                   for x in ["main", "A", "B", "C", "AB", "AC", "BC", "ABC"]], ["cuda_sm120_e4m3_32"]),
    ("call5-ablations", "ablate", [("main", "main"), ("32AB-64A", "32: A+B / 64: A"),
                                   ("32ABs5v-64C", "32: A+B at 5 1 / 64: C"), ("64AC", "64: A+C"),
                                   ("64BC", "64: B+C"), ("64ABC", "64: A+B+C")],
     ["cuda_sm120_e4m3_32", "cuda_sm120_e4m3"]),
]


def change(ms: float, base: float) -> str:
    pct = round(100 * (ms / base - 1))
    return f"{pct:+d}%" if pct else "0%"


def medians(path: Path) -> dict:
    rows = json.loads(path.read_text())["rows"]
    return {(r["impl"], r["B"], r["L"], r["N"]): r["ms"] for r in rows if r.get("kv") == "fp8"}


for folder, stem, cols, forms in CALLS:
    runs = [medians(HERE / folder / f"{stem}-{suffix}.json") for suffix, _ in cols]
    print(f"{folder}\n\n| form | B | L | N | " + " | ".join(name for _, name in cols) + " |")
    print("|" + "---|" * (4 + len(cols)))
    for form in forms:
        for b, length, n in SHAPES:
            key = (form, b, length, n)
            if key not in runs[0]:
                continue
            base = runs[0][key]
            cells = [f"{base:.4f}"] + [f"{r[key]:.4f} ({change(r[key], base)})" for r in runs[1:]]
            print(f"| {form} | {b} | {length // 1000}k | {n} | " + " | ".join(cells) + " |")
    print()
