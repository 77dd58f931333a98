"""The step model beside what the generation check measured on the H200 for the same small model.

For each committed timed run (``generate.results.TIMED``: ours or SGLang's verify replayed from graphs) the model's
part of a step is its verify attention, the layers times the per-layer kernel time the sweep reads
(``kernel_times.tables("h200")``: the committed issue grids at B = 8, the tree's N, the model's H, the context). The
small model's other parts are not the step model's to predict (its draft runs on the host in Python, its weights
are kilobytes), so they are taken as measured: the predicted tokens/s is the measured one with the measured verify
replaced by the predicted attention. What separates the two is the verify forward's non-attention kernels.
"""

from __future__ import annotations

from . import kernel_times

KERNEL_OF = {("ours", "bf16"): "ours", ("ours", "fp8"): "ours-fp8", ("sglang", "bf16"): "sglang"}  # no fp8 table for SGLang


def rows(runs: list[dict] | None = None) -> list[dict]:
    """Measured against predicted, one row per timed run with a kernel table (SGLang over fp8 has none)."""
    from ..generate import results

    runs = runs if runs is not None else results.committed(only=results.TIMED)
    tables = kernel_times.tables("h200")
    out = []
    for r in runs:
        kernel = KERNEL_OF.get((r["path"], r["pool"]))
        if r["draft"].startswith("none") or kernel is None:
            continue
        attention = r["layers"] * tables[kernel].ms(8, r["context"], r["num_draft"], r["heads"])
        step = r["step_ms"]
        predicted = r["tokens_per_s"] * step / (step - r["verify_ms"] + attention)
        out.append({"H": r["heads"], "pool": r["pool"], "context": r["context"], "draft": r["draft"],
                    "path": r["path"], "accept": round(r["accept_length"], 2),
                    "verify ms, measured": round(r["verify_ms"], 3), "attention ms, model": round(attention, 3),
                    "tok/s, measured": round(r["tokens_per_s"], 1), "tok/s, model": round(predicted, 1),
                    "model / measured": round(predicted / r["tokens_per_s"], 2)})
    return out
