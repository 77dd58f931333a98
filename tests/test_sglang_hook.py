"""The SGLang hook's CPU-side decisions: mode parsing, fall-back reasons, install / uninstall wiring."""

import logging
from types import SimpleNamespace

import pytest
import torch

from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.sglang import hook as sglang_hook


def test_parse_mode(monkeypatch):
    monkeypatch.delenv("KDTREE_VERIFY", raising=False)
    assert sglang_hook.parse_mode() == "off"
    monkeypatch.setenv("KDTREE_VERIFY", "Validate")
    assert sglang_hook.parse_mode() == "validate"
    assert sglang_hook.parse_mode("on") == "on"
    with pytest.raises(ValueError, match="KDTREE_VERIFY='sometimes'"):
        sglang_hook.parse_mode("sometimes")


def _args(**over):
    b = build_verify_batch([9, 4], 4, 2)
    args = dict(q=b.q, k_extend=b.k_extend, v_extend=b.v_extend, o=b.o, k_buffer=b.k_buffer,
                custom_mask=b.custom_mask, is_causal=True, mask_indptr=b.mask_indptr)
    args.update(over)
    return args


def test_supported_call_has_no_reason():
    assert sglang_hook.unsupported_reason(**_args()) is None
    assert sglang_hook.unsupported_reason(**_args(custom_mask=None)) is None
    assert sglang_hook.unsupported_reason(**_args(custom_mask=None, mask_indptr=None)) is None  # causal, no mask


@pytest.mark.parametrize("over,needle", [
    ({"k_buffer": torch.zeros(5, 1, 576, dtype=torch.float8_e4m3fn)}, "fp8"),
    ({"sliding_window_size": 128}, "sliding window"),
    ({"sinks": torch.zeros(2)}, "sinks"),
    ({"logit_cap": 30.0}, "logit cap"),
    ({"window_kv_offsets": torch.zeros(2)}, "window KV"),
    ({"xai_temperature_len": 5}, "xai"),
    ({"q": torch.zeros(8, 2, 192, dtype=torch.bfloat16)}, "not an MLA shape"),
    ({"q": torch.zeros(8, 2, 576, dtype=torch.float16)}, "float16"),
    ({"is_causal": False, "custom_mask": None}, "non-causal"),
    ({"mask_indptr": None}, "custom_mask without mask_indptr"),
])
def test_fall_back_reasons(over, needle):
    reason = sglang_hook.unsupported_reason(**_args(**over))
    assert reason and needle in reason


def test_kv_pool_dtypes_follow_what_the_configuration_serves():
    fp8 = torch.zeros(5, 1, 576, dtype=torch.float8_e4m3fn)
    assert "serves bf16 pools" in sglang_hook.unsupported_reason(**_args(k_buffer=fp8))
    assert sglang_hook.unsupported_reason(**_args(k_buffer=fp8), kv_dtypes=("bf16", "fp8")) is None
    assert "serves fp8 pools" in sglang_hook.unsupported_reason(**_args(), kv_dtypes=("fp8",))
    half = torch.zeros(5, 1, 576, dtype=torch.float16)
    assert "float16" in sglang_hook.unsupported_reason(**_args(k_buffer=half), kv_dtypes=("bf16", "fp8"))


def _fake_backend():
    return SimpleNamespace(verify_shared_kv_fwd="sglang's own", use_verify_shared_kv=False,
                           req_to_token_pool=SimpleNamespace(size=48), num_head=8, num_draft_tokens=4)


def test_install_off_and_uninstall_restore_the_slot(caplog):
    backend = _fake_backend()
    hook = sglang_hook.install(backend, mode="off")
    assert backend.use_verify_shared_kv is False and backend._kdtree_hook is hook
    b = build_verify_batch([5], 4, 8)
    with caplog.at_level(logging.WARNING, logger="kdtree_lab.sglang.hook"):
        for _ in range(3):
            assert hook(*b.extend_attention_args(), 1.0, 1.0, b.sm_scale, max_bs=48) is False
    assert hook.stats.fell_back == 3
    assert sum("mode off" in r.message for r in caplog.records) == 1, "the reason is logged once"
    sglang_hook.uninstall(backend)
    assert backend.verify_shared_kv_fwd == "sglang's own" and backend.use_verify_shared_kv is False
    with pytest.raises(sglang_hook.HookInstallError, match="no kdtree verify hook"):
        sglang_hook.uninstall(backend)


def test_install_plans_for_the_backends_pool_and_a_pool_not_served_falls_back(monkeypatch, caplog):
    """install() reads the pool's dtype from the backend (token_to_kv_pool.dtype) and plans the kernel for it; where
    the configuration this GPU selects does not read that pool, the hook is installed and every call falls back,
    saying why once (VerifyAttention is a stub here: nothing is allocated or launched)."""
    from kdtree_lab.kernels import attention
    from kdtree_lab.kernels.launch_plan import NoConfiguration

    planned = []

    class Refuses:
        def __init__(self, max_bs, num_draft, num_heads, kv_dtype, device, impl, fp8_math="auto"):
            planned.append((max_bs, num_draft, num_heads, kv_dtype))
            raise NoConfiguration(f"kv_dtype: verify_bf16_only_kernel<64> does not read {kv_dtype} pools")

    monkeypatch.setattr(attention, "VerifyAttention", Refuses)
    backend = _fake_backend()
    backend.token_to_kv_pool = SimpleNamespace(dtype=torch.float8_e4m3fn)
    hook = sglang_hook.install(backend, mode="on")
    assert planned == [(48, 4, 8, "fp8")] and backend.use_verify_shared_kv is True
    b = build_verify_batch([5], 4, 8, kv_dtype="fp8")
    with caplog.at_level(logging.WARNING, logger="kdtree_lab.sglang.hook"):
        for _ in range(2):
            assert hook(*b.extend_attention_args(), 1.0, 1.0, b.sm_scale, max_bs=48) is False
    assert sum("fp8 KV pool" in r.message and "does not read fp8" in r.message for r in caplog.records) == 1
    del backend.token_to_kv_pool  # a backend without the attribute: a bf16 pool, as SGLang's default
    sglang_hook.uninstall(backend)
    sglang_hook.install(backend, mode="on")
    assert planned[-1] == (48, 4, 8, "bf16")


def test_parse_impl(monkeypatch):
    monkeypatch.delenv("KDTREE_VERIFY_IMPL", raising=False)
    assert sglang_hook.parse_impl() == "cuda"
    monkeypatch.setenv("KDTREE_VERIFY_IMPL", "triton")
    assert sglang_hook.parse_impl() == "triton" and sglang_hook.parse_impl("cuda_sm120") == "cuda_sm120"
    with pytest.raises(ValueError, match="KDTREE_VERIFY_IMPL='cutlass': expected one of cuda, "):
        sglang_hook.parse_impl("cutlass")


def test_install_plans_what_it_is_asked_and_larger_batches_or_other_widths_fall_back_with_their_reason():
    """install(max_bs=, num_draft=, impl=) plans the Triton twin (it runs here under the interpreter) for fewer
    requests than the pool: a batch above the plan and a draft width it was not planned for fall back, o unwritten,
    each reason counted in stats.reasons; a planned call is served and matches the oracle."""
    from kdtree_lab.checks.oracle import compare, reference
    from kdtree_lab.checks.parity import within_tolerance

    backend = _fake_backend()
    backend.device = "cpu"
    hook = sglang_hook.install(backend, mode="on", max_bs=2, impl="triton")
    assert (hook.max_bs, hook.num_draft, hook.num_heads, hook.impl) == (2, 4, 8, "triton")
    big = build_verify_batch([5, 3, 2], 4, 8, seed=1)
    assert hook(*big.extend_attention_args(), 1.0, 1.0, big.sm_scale, max_bs=48) is False
    wide = build_verify_batch([5], 6, 8, seed=2)
    assert hook(*wide.extend_attention_args(), 1.0, 1.0, wide.sm_scale, max_bs=48) is False
    assert torch.isnan(big.o).all() and torch.isnan(wide.o).all(), "a refused call writes nothing"
    assert hook.stats.fell_back == 2 and len(hook.stats.reasons) == 2
    assert any("bs=3" in r and "max_bs=2" in r for r in hook.stats.reasons)
    assert any("N=6" in r and "N=4" in r for r in hook.stats.reasons)
    ok = build_verify_batch([7, 3], 4, 8, seed=3)
    assert hook(*ok.extend_attention_args(), 1.0, 1.0, ok.sm_scale, max_bs=48) is True
    assert hook.stats.served == 1 and within_tolerance(compare(ok.o, reference(ok)))


def test_a_pool_the_implementation_does_not_read_is_refused_at_install(caplog):
    backend = _fake_backend()
    backend.device = "cpu"
    backend.token_to_kv_pool = SimpleNamespace(dtype=torch.bfloat16)
    hook = sglang_hook.install(backend, mode="on", impl="cuda_sm120_fp8")  # the e4m3 variant reads fp8 pools only
    assert hook.attn is None and "impl cuda_sm120_fp8 serves fp8 KV pools, not bf16" in hook.refusal
    b = build_verify_batch([5], 4, 8)
    assert hook(*b.extend_attention_args(), 1.0, 1.0, b.sm_scale, max_bs=48) is False
    assert list(hook.stats.reasons) == [hook.refusal]


def test_install_refuses_an_unknown_backend_layout():
    with pytest.raises(sglang_hook.HookInstallError, match="SGLang 0.5.23.*installed SGLang"):
        sglang_hook.install(SimpleNamespace(forward_extend=None), mode="on")
    backend = _fake_backend()
    del backend.num_head
    with pytest.raises(sglang_hook.HookInstallError, match="num_head"):
        sglang_hook.install(backend, mode="off")


NAMED = ("sm_scale", "logit_cap", "sliding_window_size", "sinks", "window_kv_offsets", "xai_temperature_len")


def test_the_hook_knows_every_argument_of_sglangs_kernel():
    """SGLang's real extend_attention_fwd: its first 15 parameters are the positional ones the backend passes (the
    hook's own names), every keyword after them is either named by unsupported_reason or in EXTRA_ARGS."""
    import inspect

    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    params = list(inspect.signature(extend_attention_fwd).parameters)
    ours = list(inspect.signature(sglang_hook.VerifyHook.__call__).parameters)[1:16]
    assert len(params) >= 15 and len(ours) == 15 and params[13:15] == ours[13:15] == ["k_scale", "v_scale"]
    assert set(params[15:]) == set(NAMED) | set(sglang_hook.EXTRA_ARGS)


@pytest.mark.parametrize("name,value,needle", [
    ("skip_prefix_custom_mask", False, "over the prefix"),
    ("lse_extend", torch.zeros(2), "LSE output"),
    ("skip_prefix", True, "skip_prefix"),
    ("skip_extend", True, "skip_extend"),
    ("page_size", 16, "page size 16"),
    ("score_mod", object(), "score_mod"),
    ("aux_tensors", [torch.zeros(1)], "aux tensors"),
    ("extend_seq_lens_cpu", [4, 4], None),
    ("identity_kv_indices", True, None),
    ("a_new_argument", 1, "unknown to the hook"),
])
def test_every_keyword_combination_is_served_or_falls_back_with_its_reason(name, value, needle):
    reason = sglang_hook.unsupported_reason(**_args(**{name: value}))
    assert (reason is None) if needle is None else (needle in reason), reason
    defaults = {"skip_prefix_custom_mask": True, "lse_extend": None, "skip_prefix": False, "skip_extend": False,
                "page_size": 1, "score_mod": None, "aux_tensors": None}
    if name in defaults:  # at SGLang's default the call is served
        assert sglang_hook.unsupported_reason(**_args(**{name: defaults[name]})) is None


@pytest.mark.parametrize("causal,mask,indptr", [(c, m, i) for c in (True, False) for m in (True, False)
                                                for i in (True, False)])
def test_mask_argument_grid(causal, mask, indptr):
    """Every is_causal x custom_mask x mask_indptr presence combination SGLang's kernel accepts."""
    b = build_verify_batch([9, 4], 4, 2)
    reason = sglang_hook.unsupported_reason(**_args(is_causal=causal, custom_mask=b.custom_mask if mask else None,
                                                    mask_indptr=b.mask_indptr if indptr else None))
    if mask and not indptr:
        assert "custom_mask without mask_indptr" in reason
    elif not causal and not mask:
        assert "non-causal verify without a mask" in reason
    else:
        assert reason is None


def test_fp8_math_comes_from_the_environment_and_a_bad_value_is_one_line(monkeypatch):
    monkeypatch.delenv(sglang_hook.FP8_MATH_ENV, raising=False)
    assert sglang_hook.parse_fp8_math() == "auto"
    monkeypatch.setenv(sglang_hook.FP8_MATH_ENV, " E4M3 ")
    assert sglang_hook.parse_fp8_math() == "e4m3"
    assert sglang_hook.parse_fp8_math("exact") == "exact"
    monkeypatch.setenv(sglang_hook.FP8_MATH_ENV, "fast")
    with pytest.raises(ValueError, match="KDTREE_FP8_MATH='fast': expected one of auto, exact, e4m3"):
        sglang_hook.parse_fp8_math()
