"""The capture-safety audit finds host syncs, allocations and frozen shape reads (on a CPU via dispatch)."""

import torch

from kdtree_lab.checks.capture_audit import CaptureAuditReport, audit_capture, watch
from kdtree_lab.checks.capture_plants import planted_findings
from kdtree_lab.checks.graphs import GraphConfig, sglang_capture_sizes


def test_planted_breakers_are_caught_with_their_line():
    rows = planted_findings("cpu")
    assert [r["expected"] for r in rows] == ["host-sync", "frozen-shape", "allocation"]
    assert all(r["caught"] for r in rows)
    assert all("capture_plants.py:" in r["finding"] for r in rows)


def test_clean_in_place_call_is_capture_safe():
    x = torch.ones(16)
    y = torch.empty(16)
    assert audit_capture(lambda: torch.mul(x, 2, out=y)).capture_safe


def test_host_reads_of_every_kind():
    x = torch.arange(6.0)
    rep = audit_capture(lambda: (x.tolist(), x.cpu() if False else None, bool(x.sum() > 0), x.nonzero(),
                                 x.to("cpu")))
    ops = {f.op for f in rep.by_kind("host-sync")}
    assert {"Tensor.tolist", "Tensor.__bool__", "aten.nonzero", "Tensor.to"} <= ops, ops


def test_oracle_is_not_capture_safe_and_the_audit_says_where():
    from kdtree_lab.checks.batch import build_verify_batch
    from kdtree_lab.checks.oracle import reference

    rep = audit_capture(reference, build_verify_batch([4, 3], 2, 1))
    assert any(f.op == "Tensor.tolist" and "oracle.py" in f.where for f in rep.findings)


def test_watched_shape_reads():
    report = CaptureAuditReport()
    kv = watch(torch.arange(10), "kv_indices", report)
    rep = audit_capture(lambda: (kv.shape[0], kv.size(0), kv.numel(), len(kv)), watch_shapes={"kv_indices": kv})
    assert {f.op for f in rep.by_kind("frozen-shape")} == {"kv_indices.shape", "kv_indices.size",
                                                           "kv_indices.numel", "kv_indices.__len__"}
    assert audit_capture(lambda: kv.data_ptr(), watch_shapes={"kv_indices": kv}).capture_safe


def test_sglang_capture_sizes_largest_first():
    assert len(sglang_capture_sizes(48)) == 23
    assert GraphConfig(max_bs=48).capture_sizes[:3] == [48, 44, 40]
    assert GraphConfig(max_bs=8).capture_sizes == [8, 7, 6, 5, 4, 3, 2, 1]


def test_graph_checks_are_one_list_for_the_cli_and_notebook_05():
    from kdtree_lab.checks.graphs import graph_checks

    plants = [{"planted": "a host read", "caught": True}, {"planted": "an allocation", "caught": False}]
    assert [c["ok"] for c in graph_checks(None, plants)] == [True, False]
    result = {"replay": {"ok": True}, "audit_capture_safe": True,
              "validate_in_graph": [{"clean_ok": True, "planted_caught": True}]}
    names = [c["name"] for c in graph_checks(result, plants[:1])]
    assert names[1:] == ["replays match eager and the oracle, addresses stable", "the captured call is capture-safe",
                         "validate-in-graph clean and catches a planted error"]
    result["validate_in_graph"][0]["planted_caught"] = False
    assert not graph_checks(result, plants[:1])[-1]["ok"]
