"""Tables the README and docs/ quote, generated from committed result files and the code's own registries (so no
figure is typed by hand).

``python scripts/readme_tables.py`` rewrites the blocks between ``<!-- BEGIN name -->`` and ``<!-- END name -->``
in README.md and the docs pages of ``FILES``; tests/test_readme.py checks that each matches what this module
generates. Each block's function lives in ``scripts/docs_tables/`` by subject (its ``__init__`` lists them)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docs_tables, beside this file

from docs_tables.defaults import chain_peers_table, configs_table, current_table, headline_sentence  # noqa: E402
from docs_tables.card_floor import issue52_h100_table, issue52_targets_table  # noqa: E402
from docs_tables.fp8 import (e4m3_accuracy_table, e4m3_ceiling_table, fp8_fresh_sentence,  # noqa: E402
                             fp8_headline_sentence, fp8_table)
from docs_tables.h200 import (bench_table, fixed_cost_table, floors_table, issue18_targets_table,  # noqa: E402
                              targets_table, v5_table, versions_table)
from docs_tables.peers import b12x_sentence, b12x_table  # noqa: E402
from docs_tables.rtx import (card_checks_table, card_model_table, rtx_fp8_prediction_table,  # noqa: E402
                             rtx_headline_sentence, rtx_prediction_table, sm120_fp8_table)
from docs_tables.sm120 import (sm120_gen2_targets_table, sm120_impl, sm120_per_shape_table,  # noqa: E402, F401
                               sm120_table, sm120_targets_table, xqa_peer_table)
from docs_tables.speculation import speculation_check_table, speculation_table  # noqa: E402
from kdtree_lab.core.paths import ROOT  # noqa: E402

BLOCKS = {"headline": headline_sentence, "configs": configs_table, "current": current_table, "v5": v5_table, "fixed_cost": fixed_cost_table, "issue18_targets": issue18_targets_table, "fp8": fp8_table,
          "xqa_peer": xqa_peer_table, "rtx_fp8_prediction": rtx_fp8_prediction_table, "bench": bench_table, "versions": versions_table,
          "targets": targets_table, "floors": floors_table,
          "sm120": sm120_table, "sm120_targets": sm120_targets_table, "rtx_prediction": rtx_prediction_table,
          "sm120_per_shape": sm120_per_shape_table, "sm120_gen2_targets": sm120_gen2_targets_table,
          "speculation": speculation_table, "speculation_check": speculation_check_table,
          "e4m3_ceiling": e4m3_ceiling_table, "e4m3_accuracy": e4m3_accuracy_table, "sm120_fp8": sm120_fp8_table,
          "chain_peers": chain_peers_table, "fp8_headline": fp8_headline_sentence, "fp8_fresh": fp8_fresh_sentence,
          "b12x": b12x_sentence, "b12x_table": b12x_table, "card_model": card_model_table,
          "sm120_checks": card_checks_table, "rtx_headline": rtx_headline_sentence,
          "issue52_targets": issue52_targets_table, "issue52_h100": issue52_h100_table}
FILES = (ROOT / "README.md", *(ROOT / "docs" / f"{name}.md" for name in ("kernels", "results", "performance",
                                                                         "performance-history", "memory", "sglang", "speculation")))


def _replace(text: str, name: str, body: str) -> str:
    return re.sub(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)",
                  lambda m: m.group(1) + body + "\n" + m.group(2), text, flags=re.S)


def render(text: str) -> str:
    for name, make in BLOCKS.items():
        if f"<!-- BEGIN {name} -->" in text:
            text = _replace(text, name, make())
    return text


def main() -> None:
    for path in FILES:
        path.write_text(render(path.read_text()))


if __name__ == "__main__":
    main()
