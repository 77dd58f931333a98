"""Phase (c): what the hook must not serve (a pool dtype no configuration reads, a batch above the planned size, a
draft width it was not planned for, a forced configuration that does not read the pool): it falls back naming its
reason, leaves the poisoned output untouched, and SGLang's own kernel then writes what the unhooked backend
writes."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from ...checks.oracle import compare
from ...sglang import hook as hook_module
from .recorder import Recorder, delta, stats
from .settings import Draft, Settings
from .stack import build_stack, make_backend
from .steps import Rand, draft_step, eager_verify, fresh_requests, oracle, qkv, sync


@dataclass
class Refusal:
    """One input the hook must refuse: how the hook is installed and what SGLang hands it."""

    name: str
    expect: str  # a fragment of the reason the hook gives
    kv: str = "bf16"
    max_bs: int | None = None  # plan the hook for fewer requests than SGLang sends
    bs: int | None = None
    num_draft: int | None = None  # the step's draft width (adaptive speculation) instead of the server's
    steps: int | None = None
    impl_config: str | None = None  # force this kernel configuration while the hook plans


def refusals(st: Settings, draft: Draft) -> list[Refusal]:
    """(c)'s cases for ``draft`` (a tree configuration: SGLang drafts the narrower width too)."""
    out = [Refusal("pool dtype no configuration reads (fp8_e5m2)", "KV pool dtype torch.float8_e5m2", kv="fp8_e5m2"),
           Refusal("batch above the planned size", f"max_bs={max(1, st.max_bs // 2)}", max_bs=max(1, st.max_bs // 2),
                   bs=st.max_bs),
           Refusal("draft width it was not planned for", f"N={draft.num_draft // 2}", num_draft=draft.num_draft // 2,
                   steps=max(1, draft.steps - 1))]
    if torch.cuda.is_available():  # the library's own refusal: a forced configuration that does not read the pool
        out.append(Refusal("bf16 pool under a configuration that reads fp8 only (the sm_120 kernel's exact fp8 variant, "
                           "forced)", "does not read bf16", kv="bf16", impl_config="cuda_sm120_fp8"))
    return out


def refuse_phase(sg: SimpleNamespace, st: Settings, draft: Draft, rec: Recorder, rnd: Rand, device, model_dir: str,
                 judge_sglang: bool, impl: str | None) -> None:
    """(c) Each refusal eagerly: the hook falls back naming its reason, its output stays poisoned (a probe around
    the verify slot checks it when the hook returns), and SGLang's own kernel then writes what the unhooked
    backend writes."""
    for case in refusals(st, draft):
        stack = build_stack(sg, draft, case.kv, st, device, model_dir)
        ctx, case_impl = contextlib.nullcontext(), impl
        if case.impl_config:  # the library's own choice, forced to case.impl_config (an implementation pinning its
            from ...kernels import loader  # own configuration would override the forcing): the library refuses

            ctx, case_impl = loader.impl_config(case.impl_config), "cuda"
        with ctx:
            hooked, hook = make_backend(stack, "on", case_impl)
            if case.max_bs is not None:
                hook_module.uninstall(hooked)
                hook = hook_module.install(hooked, "on", max_bs=case.max_bs, impl=case_impl)
        plain, _ = make_backend(stack, "off")
        probe = []
        inner = hooked.verify_shared_kv_fwd

        def slot(*args, inner=inner, probe=probe, **kw):
            served = inner(*args, **kw)
            probe.append({"served": bool(served), "o_untouched": bool(torch.isnan(args[3]).all())})
            return served

        hooked.verify_shared_kv_fwd = slot
        bs = case.bs or max(1, st.max_bs // 2)
        reqs = fresh_requests(stack, bs, rnd)
        if case.num_draft:  # the request's draft tokens: the narrower step's slots are the first ones
            reqs.out_cache_loc = reqs.out_cache_loc.view(bs, stack.n)[:, :case.num_draft].reshape(-1).contiguous()
        spec, mask = draft_step(stack, reqs, rnd, num_draft=case.num_draft, steps=case.steps)
        width = case.num_draft or stack.n
        q, k, v = qkv(stack, bs * width, rnd)
        before = stats(hook)
        got = eager_verify(stack, hooked, reqs, spec, q, k, v, save_kv_cache=True).clone()
        theirs = eager_verify(stack, plain, reqs, spec, q, k, v, save_kv_cache=False)
        sync(device)
        calls = delta(before, hook)
        reasons = [r for r in hook.stats.reasons if case.expect in r]
        same = bool(torch.equal(got.nan_to_num(nan=7.0), theirs.nan_to_num(nan=7.0)))
        sgl = compare(theirs, oracle(stack, reqs, q, k, v, mask))
        ok = (calls["fell_back"] == calls["calls"] == 1 and bool(reasons) and len(probe) == 1
              and not probe[0]["served"] and probe[0]["o_untouched"] and same
              and (sgl["nan"] == 0 or not judge_sglang))
        rec.row("refuse", {"config": f"{draft.name}", "case": case.name, "kv": case.kv, "bs": bs,
                           "planned": {"max_bs": hook.max_bs, "num_draft": hook.num_draft,
                                       "impl_config": case.impl_config},
                           "reason": reasons[0] if reasons else sorted(hook.stats.reasons), "probe": probe,
                           "sglang_output_equals_unhooked": same, "sglang_rel_l2": sgl["rel_l2"], **calls,
                           "ok": ok})
