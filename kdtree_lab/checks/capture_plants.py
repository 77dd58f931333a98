"""Planted capture breakers for the capture-safety audit's demonstrations and tests (kept out of
``capture_audit`` so findings point at these lines)."""

from __future__ import annotations

import torch

from .capture_audit import CaptureAuditReport, audit_capture, watch


def planted_findings(device: str | torch.device = "cpu") -> list[dict]:
    """Plant what breaks capture and show the audit naming it: a host read (``.item()``), a shape read of the
    oversized ``kv_indices`` buffer, an allocation, and (on a GPU) a launch on the default stream while a side
    stream is current. One row per plant: what, caught, and the finding."""
    dev = torch.device(device)
    x = torch.ones(8, device=dev)
    rows = []

    def item_sync(t):
        return t.sum().item()

    def sizes_from_shape(kv):
        return kv[: kv.shape[0] // 2].sum()

    def allocates(t):
        return t + torch.zeros(8, device=t.device)

    def default_stream_launch(t):
        with torch.cuda.stream(torch.cuda.default_stream(t.device)):
            t.mul_(2)

    report = CaptureAuditReport()
    kv = watch(torch.arange(64, device=dev), "kv_indices", report)
    plants = [("x.sum().item() inside the call", "host-sync", lambda: audit_capture(item_sync, x)),
              ("slice kv_indices by kv_indices.shape[0]", "frozen-shape",
               lambda: audit_capture(sizes_from_shape, kv, watch_shapes={"kv_indices": kv})),
              ("torch.zeros inside the call", "allocation", lambda: audit_capture(allocates, x))]
    if dev.type == "cuda":
        def on_side_stream():
            side = torch.cuda.Stream(dev)
            with torch.cuda.stream(side):
                return audit_capture(default_stream_launch, x)

        plants.append(("kernel launched on the default stream while a side stream is current", "stream",
                       on_side_stream))
    for what, kind, run in plants:
        rep = run()
        hits = rep.by_kind(kind)
        rows.append({"planted": what, "expected": kind, "caught": bool(hits),
                     "finding": f"{hits[0].op} at {hits[0].where}" if hits else "-"})
    return rows
