"""The chained-calls check (kdtree_lab.checks.graphs.chained_calls) on a CPU: the Triton twin through one workspace
passes it, and a call that is disturbed only when it runs inside the chain fails it (its GPU use, with CUDA graphs and
every configuration: tests/test_gpu_graphs.py)."""

from kdtree_lab.checks import graphs
from kdtree_lab.kernels.attention import VerifyAttention

SMALL = dict(kv="bf16", prefixes=(40, 3, 17), num_draft=2, num_heads=2, replays=2, device="cpu", graph=False)


def test_the_triton_twin_passes_the_chained_calls_check():
    rep = graphs.chained_calls("triton", **SMALL)
    assert rep.ok, rep.failures
    assert rep.worst_rel_l2 > 0 and rep.replays == 2 and rep.prefixes == (40, 3, 17)


def test_a_call_disturbed_inside_the_chain_fails_it(monkeypatch):
    """Every second call of each chain (not when it runs alone) writes a shifted output, as a call that read the
    previous call's partial rows would: both the comparison with the call alone and the oracle catch it."""
    calls = {"n": 0}

    class Disturbed(VerifyAttention):
        def run(self, *args):
            out = super().run(*args)
            n = calls["n"]
            calls["n"] += 1
            if n >= 3 and (n - 3) % 6 == 1:  # after the warm-up chain: replay r's chain is calls 3 + 6r .. + 2
                out.add_(1.0)
            return out

    monkeypatch.setattr(graphs, "VerifyAttention", Disturbed)
    rep = graphs.chained_calls("triton", **SMALL)
    assert not rep.ok
    assert sum("differs from the same call run alone" in f for f in rep.failures) == 2
    assert all("call 1 (L 3)" in f for f in rep.failures)
    assert any("oracle rel_l2" in f for f in rep.failures)
