"""Print this folder's table (README.md) from call 1's bench JSONs: graph-replay medians in ms, and each setting's
change against main in the same call.

    python3 data/results/h200/2026-12-04-e4m3-bulk-rows/summarize.py
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent / "call1"
SHAPES = [(8, 200000, 4), (1, 200000, 4), (8, 32768, 4), (1, 32768, 4), (1, 200000, 16), (8, 200000, 16)]
COLS = [("main", "main"), ("main-AB", "main A+B"), ("bulk", "bulk (32-row)"), ("bulk-AB", "bulk A+B"),
        ("bulk-both", "bulk (both forms)")]


def change(ms: float, base: float) -> str:
    pct = round(100 * (ms / base - 1))
    return f"{pct:+d}%" if pct else "0%"


def medians(path: Path) -> dict:
    rows = json.loads(path.read_text())["rows"]
    return {(r["impl"], r["B"], r["L"], r["N"]): r["ms"] for r in rows if r.get("kv") == "fp8"}


runs = [medians(HERE / f"bulk-{stem}.json") for stem, _ in COLS]
print("| form | B | L | N | " + " | ".join(name for _, name in COLS) + " |")
print("|" + "---|" * (4 + len(COLS)))
for form in ("cuda_sm120_e4m3_32", "cuda_sm120_e4m3"):
    for b, length, n in SHAPES:
        key = (form, b, length, n)
        base = runs[0][key]
        cells = [f"{base:.4f}"] + [f"{r[key]:.4f} ({change(r[key], base)})" for r in runs[1:]]
        print(f"| {form} | {b} | {length // 1000}k | {n} | " + " | ".join(cells) + " |")
