"""Phase (a): eager target verify through SGLang's ``init_forward_metadata`` and ``forward_extend``, the hooked
backend against an unhooked one on the same pool and against the fp64 oracle."""

from __future__ import annotations

from ...checks.parity import sglang_verdict
from .recorder import Recorder, delta, stats
from .stack import Stack, e4m3_math, make_backend
from .steps import Rand, draft_step, eager_verify, fresh_requests, oracle, qkv, sync


def eager_phase(stack: Stack, rec: Recorder, rnd: Rand, judge_sglang: bool) -> None:
    """(a) Eager target verify through SGLang's init_forward_metadata, hooked against unhooked and the oracle."""
    hooked, hook = make_backend(stack, "on")
    plain, _ = make_backend(stack, "off")
    e4m3 = e4m3_math(hook)  # the plan's, for every batch of the phase
    config = f"{stack.draft.name} {stack.kv}"
    for i in range(stack.settings.eager_batches):
        bs = int(rnd.np.integers(1, stack.settings.max_bs + 1)) if i else stack.settings.max_bs
        reqs = fresh_requests(stack, bs, rnd)
        spec, mask = draft_step(stack, reqs, rnd)
        q, k, v = qkv(stack, bs * stack.n, rnd)
        before = stats(hook)
        ours = eager_verify(stack, hooked, reqs, spec, q, k, v, save_kv_cache=True).clone()
        theirs = eager_verify(stack, plain, reqs, spec, q, k, v, save_kv_cache=False)
        sync(stack.device)
        verdict = sglang_verdict(ours, theirs, oracle(stack, reqs, q, k, v, mask), judge_sglang, e4m3=e4m3)
        calls = delta(before, hook)
        ok = verdict["ok"] and calls["served"] == calls["calls"] == 1
        rec.row("eager", {"config": config, "bs": bs, "lens": reqs.lens, **verdict, **calls, "ok": ok,
                          "e4m3_math": e4m3,
                          "reasons": dict(hook.stats.reasons)})
