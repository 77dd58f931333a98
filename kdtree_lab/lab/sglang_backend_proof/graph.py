"""Phase (b): SGLang's CUDA-graph path: ``init_cuda_graph_state``, a capture per SGLang capture size, then replays
of fresh requests padded to the captured size, each against the unhooked backend run eagerly and the oracle (in
validate mode the hook's device-side error is read after each replay). Without a GPU the captured function is
called eagerly at each replay."""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch

from ...checks.parity import sglang_verdict
from ...core.mla import D_QK, D_V
from ...sglang import hook as hook_module
from .recorder import Recorder, delta, stats
from .settings import VALIDATE_SAME_TOL, ProofError
from .stack import Stack, e4m3_math, make_backend
from .steps import Rand, draft_step, eager_forward_batch, eager_verify, fresh_requests, oracle, qkv, sync


def graph_phase(stack: Stack, rec: Recorder, rnd: Rand, mode: str, replays: int, judge_sglang: bool,
                capture_bs: list[int]) -> None:
    """(b) SGLang's graph path with the hook in ``mode`` (on / validate), each replay against the unhooked backend
    run eagerly on the same batch and against the oracle."""
    sg, n, dev = stack.sg, stack.n, stack.device
    gpu = dev.type == "cuda"
    hooked, hook = make_backend(stack, mode)
    plain, _ = make_backend(stack, "off")
    e4m3 = e4m3_math(hook)  # the plan's, for every capture size and replay
    max_bs = max(capture_bs)
    max_tokens = max_bs * n
    hooked.init_cuda_graph_state(max_bs, max_tokens)
    fill = hooked.get_cuda_graph_seq_len_fill_value()
    vmask = hooked.verify_mask
    if vmask is None:
        raise ProofError("TritonAttnBackend.init_cuda_graph_state allocated no verify mask for the target model")
    # the decode graph runner's static inputs (base_runner's dtypes) and the layer's inputs
    buf = SimpleNamespace(
        input_ids=torch.zeros(max_tokens, dtype=torch.int64, device=dev),
        req_pool_indices=torch.zeros(max_bs, dtype=torch.int64, device=dev),
        seq_lens=torch.full((max_bs,), fill, dtype=torch.int64, device=dev),
        seq_lens_cpu=torch.full((max_bs,), fill, dtype=torch.int64),
        out_cache_loc=torch.zeros(max_tokens, dtype=torch.int64, device=dev),
        positions=torch.zeros(max_tokens, dtype=torch.int64, device=dev), encoder_lens=None,
        mamba_track_indices=None,
        custom_mask=torch.ones((max_bs * fill + max_tokens) * n, dtype=torch.bool, device=dev))
    q_buf = torch.zeros(max_tokens, stack.num_heads, D_QK, dtype=torch.bfloat16, device=dev)
    k_buf = torch.zeros(max_tokens, 1, D_QK, dtype=torch.bfloat16, device=dev)
    o_buf = torch.full((max_tokens, stack.num_heads * D_V), float("nan"), dtype=torch.bfloat16, device=dev)
    config = f"{stack.draft.name} {stack.kv} {mode}"
    graphs = {}
    pool_handle = torch.cuda.graph_pool_handle() if gpu else None
    t0 = time.perf_counter()
    for bs in sorted(capture_bs, reverse=True):  # SGLang captures the largest first
        t = bs * n
        spec = sg.EagleVerifyInput(draft_token=None, custom_mask=buf.custom_mask, positions=None, retrieve_index=None,
                                   retrieve_next_token=None, retrieve_next_sibling=None, retrieve_cum_len=None,
                                   spec_steps=stack.draft.steps, topk=stack.draft.topk, draft_token_num=n,
                                   capture_hidden_mode=sg.CaptureHiddenMode.FULL, seq_lens_sum=None,
                                   seq_lens_cpu=None)
        fb = sg.ForwardBatch(forward_mode=sg.ForwardMode.TARGET_VERIFY, batch_size=bs,
                             input_ids=buf.input_ids[:t], req_pool_indices=buf.req_pool_indices[:bs],
                             seq_lens=buf.seq_lens[:bs], seq_lens_cpu=buf.seq_lens_cpu[:bs],
                             out_cache_loc=buf.out_cache_loc[:t], seq_lens_sum=int(buf.seq_lens_cpu[:bs].sum()),
                             positions=buf.positions[:t], spec_info=spec, spec_algorithm=stack.algo,
                             capture_hidden_mode=sg.CaptureHiddenMode.FULL)
        stack.translator.bind_runner_slots(fb)
        hooked.init_forward_metadata_out_graph(fb, in_capture=True)
        fb._attn_output = o_buf[:t]

        def run_once(fb=fb, t=t):
            hooked.init_forward_metadata_in_graph(fb)
            hooked.forward_extend(q_buf[:t], k_buf[:t], k_buf[:t, :, :D_V], stack.layer, fb)

        before = stats(hook)
        warm_errors = []
        if gpu:
            for _ in range(2):  # SGLang's capture warms up first (Triton compiles outside the graph)
                try:
                    run_once()  # validate mode checks at once outside capture (the capture-time inputs: ones)
                except hook_module.ValidationFailed as exc:
                    warm_errors.append(str(exc))
            sync(dev)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool_handle):
                run_once()
            sync(dev)
            if mode == "validate":
                hook.err.zero_()  # the captured call's error is recorded at each replay, read after it
        else:
            g = None  # dry run: the captured function is called eagerly at each "replay"
        graphs[bs] = (g, hooked.forward_metadata, run_once, delta(before, hook), warm_errors)
    rec.seconds(f"graph capture ({mode})", time.perf_counter() - t0)

    prev = 0
    for bs in sorted(capture_bs):
        g, captured_metadata, run_once, capture_calls, warm_errors = graphs[bs]
        mismatches, worst, rows_stats, validate_errors, lens_seen, bit_equal = 0, {}, stats(hook), [], [], 0
        for i in range(replays):
            raw = int(rnd.np.integers(prev + 1, bs + 1))
            reqs = fresh_requests(stack, raw, rnd)
            lens_seen.append(reqs.lens)
            spec, mask = draft_step(stack, reqs, rnd, tree_mask_buf=vmask.buffer, mask_mode=vmask.mode,
                                    fill_prefix_mask=vmask.is_read)
            live = eager_forward_batch(stack, reqs, spec)  # what the runner was handed
            rt = raw * n
            # the runner's load_batch: live inputs into the static buffers, padding to the captured size
            buf.req_pool_indices[:raw].copy_(reqs.req_pool_indices)
            buf.req_pool_indices[raw:bs].zero_()
            buf.seq_lens[:raw].copy_(reqs.seq_lens)
            buf.seq_lens[raw:bs].fill_(fill)
            buf.seq_lens_cpu[:raw].copy_(reqs.seq_lens.cpu())
            buf.seq_lens_cpu[raw:bs].fill_(fill)
            buf.out_cache_loc[:rt].copy_(live.out_cache_loc)
            buf.out_cache_loc[rt:bs * n].zero_()
            buf.positions[:rt].copy_(spec.positions)
            q, k, v = qkv(stack, bs * n, rnd)
            q_buf[:bs * n].copy_(q)
            k_buf[:bs * n].copy_(k)
            o_buf.fill_(float("nan"))
            view = sg.build_replay_fb_view(forward_batch=live, buffers=buf, bs=bs, raw_bs=raw, num_tokens=bs * n,
                                           global_num_tokens_cpu=None, seq_len_fill_value=fill,
                                           capture_forward_mode=sg.ForwardMode.TARGET_VERIFY,
                                           is_encoder_decoder=False)
            hooked.init_forward_metadata_out_graph(view)
            err = None
            if g is not None:
                g.replay()
            else:  # what the graph baked in: the metadata object of its capture (the replay refilled its buffers)
                hooked.forward_metadata = captured_metadata
                try:
                    run_once()  # outside capture validate mode checks at once
                except hook_module.ValidationFailed as exc:
                    validate_errors.append(str(exc))
                    err = float("inf")
            sync(dev)
            ours = o_buf[:rt].view(rt, stack.num_heads, D_V).clone()
            if mode == "validate" and err is None:
                try:
                    err = hook.check()
                except hook_module.ValidationFailed as exc:
                    validate_errors.append(str(exc))
                    err = float("inf")
            spec.custom_mask = mask.to(torch.uint8)  # the step's tree, off the graph's buffer, for the reference
            theirs = eager_verify(stack, plain, reqs, spec, q[:rt], k[:rt], v[:rt], save_kv_cache=False)
            sync(dev)
            verdict = sglang_verdict(ours, theirs, oracle(stack, reqs, q[:rt], k[:rt], v[:rt], mask), judge_sglang,
                                     e4m3=e4m3)
            if mode == "validate":
                # SGLang's kernel wrote o inside the graph: it must be what the unhooked backend writes eagerly (to
                # bf16 rounding: the two launches see int64 / int32 indptrs and another kv_indices length; whether
                # they agree bit for bit is recorded), and the hook's device-side error within the tolerance
                same = bool(torch.equal(ours.nan_to_num(nan=7.0), theirs.nan_to_num(nan=7.0)))
                verdict.update(validate_error=err, sglang_output_equals_unhooked=same)
                bit_equal += same
                close = verdict["ours_nan"] == 0 and verdict["ours_vs_sglang_rel_l2"] <= VALIDATE_SAME_TOL
                verdict["ok"] = err is not None and (not judge_sglang or (close and err <= hook.tol))
            if not verdict["ok"]:
                mismatches += 1
            for key in ("ours_rel_l2", "sglang_rel_l2", "ours_vs_sglang_rel_l2") + (("validate_error",)
                                                                                   if mode == "validate" else ()):
                worst[key] = max(worst.get(key, 0.0), float(verdict[key]))
        calls = delta(rows_stats, hook)
        # a replay runs no Python: the hook's calls are the capture's (warm-ups + capture), all served (in a dry run
        # the captured function runs at each replay: those calls are served too)
        total = {k: capture_calls[k] + calls[k] for k in calls}
        served_all = (total["served"] == total["calls"] > 0
                      and calls["calls"] == (0 if g is not None else replays))
        rec.row("graph", {"config": config, "capture_bs": bs, "replays": replays, "mismatches": mismatches,
                          "ok": mismatches == 0 and served_all and (not validate_errors or not judge_sglang),
                          "worst": worst,
                          "capture_calls": capture_calls, "replay_calls": calls, **total,
                          "raw_bs_range": [prev + 1, bs], "longest_prefix": max(max(x) for x in lens_seen),
                          "validate_errors": validate_errors[:3], "warmup_validate_errors": warm_errors[:2],
                          **({"sglang_bit_equal_replays": bit_equal} if mode == "validate" else {}),
                          "graph": g is not None, "e4m3_math": e4m3})
        prev = bs
    del graphs, hooked, plain
    if gpu:
        torch.cuda.empty_cache()
