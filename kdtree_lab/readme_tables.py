"""Tables the README quotes, generated from committed result files (so no figure is typed by hand).

``python -m kdtree_lab.readme_tables`` rewrites the blocks between ``<!-- BEGIN name -->`` and ``<!-- END name -->``
in README.md; a test checks that the README matches what this module generates."""

from __future__ import annotations

import json
import re

from .paths import RESULTS, ROOT

BENCH = RESULTS / "h200" / "2026-11-29-bench-quick" / "bench-quick.json"
WIDE = RESULTS / "h200" / "2026-11-29-wide-kernel" / "bench-quick.json"
PARITY = RESULTS / "h200" / "2026-11-29-correctness" / "summary.md"


def bench_table() -> str:
    data = json.loads(BENCH.read_text())
    c, p = data["ceilings"], data["provenance"]
    lines = [f"Measured on {p['gpu']} (driver {p['driver']}, torch {p['torch']}, Triton {p['triton']}) on "
             f"{p['date_utc'][:10]}; ceilings in the same run: copy {c['copy_gbps']:.0f} GB/s, bf16 GEMM "
             f"{c['gemm_tflops']:.0f} TFLOP/s. Source: `{BENCH.relative_to(ROOT)}`.", "",
             "| impl | B | L | N | H | ms | of roofline | vs SGLang verify | SGLang decode (1 token) / ours |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data["rows"]:
        if r["impl"] not in ("cuda", "triton", "sglang_extend") or r["H"] != 8 or r["N"] != 16:
            continue
        lines.append(f"| {r['impl']} | {r['B']} | {r['L']} | {r['N']} | {r['H']} | {r['ms']} | "
                     f"{r['of_roofline']:.1%} | {r.get('speedup_vs_sglang_verify', '-')} | "
                     f"{r.get('vs_sglang_decode_1tok', '-')} |")
    return "\n".join(lines)


def wide_table() -> str:
    data = json.loads(WIDE.read_text())
    p = data["provenance"]
    rows = {(r["impl"], r["B"], r["L"], r["N"], r["H"]): r for r in data["rows"]}
    lines = [f"Default kernel vs the experimental wide kernel, same run ({p['gpu']}, {p['date_utc'][:10]}). "
             f"Source: `{WIDE.relative_to(ROOT)}`.", "",
             "| B | L | N | H | default ms | wide ms | wide of roofline |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for (impl, b, length, n, h), r in rows.items():
        if impl != "cuda" or ("cuda_wide", b, length, n, h) not in rows:
            continue
        w = rows[("cuda_wide", b, length, n, h)]
        lines.append(f"| {b} | {length} | {n} | {h} | {r['ms']} | {w['ms']} | {w['of_roofline']:.1%} |")
    return "\n".join(lines)


def _replace(readme: str, name: str, body: str) -> str:
    return re.sub(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)",
                  lambda m: m.group(1) + body + "\n" + m.group(2), readme, flags=re.S)


def render(readme: str) -> str:
    return _replace(_replace(readme, "bench", bench_table()), "wide", wide_table())


def main() -> None:
    path = ROOT / "README.md"
    path.write_text(render(path.read_text()))


if __name__ == "__main__":
    main()
