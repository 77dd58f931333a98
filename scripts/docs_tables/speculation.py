"""Notebook 07's tables: today's best beside the best setup with ours, and today's best against every published
table of it."""

from __future__ import annotations

def speculation_table() -> str:
    """Notebook 07's opening table for the reference deployment: today's best beside the best setup with ours, the
    ratio with its band (a model beside measurements), from the presets and the committed kernel times."""
    from kdtree_lab.core.display import markdown_table
    from kdtree_lab.speculate import answer, sweep

    s = sweep.setup("rtx-pro-6000", "kimi-k2", 8, "int4", 1, "dflash-gsm8k")
    head = answer.headline(s, sweep.DEFAULT_CONTEXTS)
    tabs = s.tables
    return "\n".join([
        f"**Kimi K2.6 (int4) on 8 x RTX PRO 6000, TP8, one request**: today's best measured where measured, a "
        f"model elsewhere ({head['label']}). Ours: "
        f"our verify kernel (`{tabs['ours'].impl}` over a bf16 pool, `{tabs['ours-fp8'].impl}` over an fp8 pool, "
        "predicted for the card from the committed H200 rows) in the same step, with today's EAGLE-3 chain of 4 or "
        f"with DFlash drafts (acceptance preset `dflash-gsm8k`: {s.draft.chain[1]} tokens per step for its chain of "
        f"{s.draft.chain[0]}) verified as DDTree trees of 4-64 nodes; a bf16 pool holds half the fp8 pool's "
        f"{s.today.preset.kv_capacity_tokens:,} tokens.", "", markdown_table(answer.table_rows(head)), "",
        answer.words(head)])


def speculation_check_table() -> str:
    """Today's best (the model) against every published table of it, cell by cell (notebook 07's last part)."""
    from kdtree_lab.core.display import markdown_table
    from kdtree_lab.speculate import published

    lines = ["Model / measured - 1 per cell, one request (tables of `data/presets/speculation.yaml` `published`, "
             "role `today`):", "", markdown_table(published.residual_rows()), ""]
    for c in published.check_all(("today",)):
        conc = c["concurrency"]
        if conc:
            lines.append(f"- `{c['name']}`, no speculation at concurrency "
                         f"{min(x['concurrency'] for x in conc)}-{max(x['concurrency'] for x in conc)} "
                         f"({len(conc)} cells): within {max(abs(x['residual']) for x in conc):.1%}.")
        for m in c["misses"]:
            if m["why"]:
                lines.append(f"- `{c['name']}` at {published.k_words(m['context'])}: {m['residual']:+.1%}, allowed "
                             f"{m['allowed']:.0%}: {m['why']}.")
        for spec in (False, True):
            b = [x for x in c["beyond_fit"] if x["speculation"] == spec]
            if b:
                lines.append(f"- `{c['name']}`, not fitted, {'the EAGLE-3 chain' if spec else 'no speculation'} at "
                             "concurrency > 1 (context x target tokens per step: model / measured - 1): " + ", ".join(
                                 f"{published.k_words(x['context'])} x {x['tokens']}: {x['residual']:+.0%}"
                                 for x in b) + ".")
    return "\n".join(lines)
