"""Tables the README quotes, generated from committed result files (so no figure is typed by hand).

``python -m kdtree_lab.readme_tables`` rewrites the blocks between ``<!-- BEGIN name -->`` and ``<!-- END name -->``
in README.md; a test checks that the README matches what this module generates."""

from __future__ import annotations

import json
import re

from .paths import RESULTS, ROOT

BENCH = RESULTS / "h200" / "2026-11-29-bench-quick" / "bench-quick.json"
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


def render(readme: str) -> str:
    return re.sub(r"(<!-- BEGIN bench -->\n)(?:.*?\n)?(<!-- END bench -->)",
                  lambda m: m.group(1) + bench_table() + "\n" + m.group(2), readme, flags=re.S)


def main() -> None:
    path = ROOT / "README.md"
    path.write_text(render(path.read_text()))


if __name__ == "__main__":
    main()
