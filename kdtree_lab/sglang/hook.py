"""A drop-in verify hook for SGLang's Triton attention backend (MLA target verify), with off / validate / on modes.

SGLang 0.5.23's ``TritonAttnBackend.forward_extend`` calls ``self.verify_shared_kv_fwd`` when
``self.use_verify_shared_kv`` is set and the forward mode is target verify, with ``extend_attention_fwd``'s
positional arguments plus ``max_bs=``; the callable writes ``o`` and returns True, or returns False to fall back
to ``extend_attention_fwd``. ``install(backend)`` puts :class:`VerifyHook` in that slot.

Modes (argument, or the environment variable ``KDTREE_VERIFY``; ``KDTREE_FP8_MATH`` = auto / exact / e4m3 picks the
math of an fp8 pool, VerifyAttention's ``fp8_math``):

- ``off``: always fall back (SGLang's kernel runs);
- ``on``: our CUDA kernel writes ``o``;
- ``validate``: SGLang's kernel writes ``o``, ours writes a scratch buffer, and the worst relative difference is
  accumulated on the device (no host sync, so it works inside captured graphs); ``check()`` reads it after the
  step and raises past the tolerance. Outside capture the hook checks right away.

The implementation the hook runs is ``kdtree_lab.kernels.impls`` name ``impl`` (argument, or ``KDTREE_VERIFY_IMPL``;
default ``cuda``, the configuration this GPU selects; ``triton`` runs the Triton twin, e.g. on a CPU under
``TRITON_INTERPRET=1``). A pool the implementation does not read is refused at install: every call then falls back.
``stats.reasons`` counts the fall-backs per reason.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import torch

from ..core.dtypes import kv_dtype_of
from ..core.mla import D_QK, D_V, KERNEL_DEFAULT_SM_SCALE
from ..kernels.launch_plan import FP8_MATHS, NoConfiguration
from ..kernels.validate import VALIDATE_TOL, record_difference, validate_tol

log = logging.getLogger("kdtree_lab.sglang.hook")
MODES = ("off", "validate", "on")
ENV_VAR = "KDTREE_VERIFY"
IMPL_VAR = "KDTREE_VERIFY_IMPL"


class HookInstallError(RuntimeError):
    """The backend does not have the layout this hook was written against (names the SGLang version)."""


class ValidationFailed(AssertionError):
    """validate mode: our kernel's output differs from SGLang's beyond the tolerance."""


def parse_impl(value: str | None = None) -> str:
    """The implementation from ``value`` or ``$KDTREE_VERIFY_IMPL`` (default ``cuda``); an unknown name raises naming
    the variable and the names there are."""
    from ..kernels.impls import IMPLS

    raw = value if value is not None else os.environ.get(IMPL_VAR, "cuda")
    impl = raw.strip()
    if impl not in IMPLS:
        raise ValueError(f"{IMPL_VAR}={raw!r}: expected one of {', '.join(IMPLS)}")
    return impl


def parse_mode(value: str | None = None) -> str:
    """The mode from ``value`` or ``$KDTREE_VERIFY`` (default ``off``); anything else raises naming the variable."""
    raw = value if value is not None else os.environ.get(ENV_VAR, "off")
    mode = raw.strip().lower()
    if mode not in MODES:
        raise ValueError(f"{ENV_VAR}={raw!r}: expected one of {', '.join(MODES)}")
    return mode


FP8_MATH_ENV = "KDTREE_FP8_MATH"


def parse_fp8_math(value: str | None = None) -> str:
    """The fp8 math from ``value`` or ``$KDTREE_FP8_MATH`` (default ``auto``: e4m3 tensor cores on sm_120, exact
    elsewhere); anything else raises naming the variable."""
    raw = value if value is not None else os.environ.get(FP8_MATH_ENV, "auto")
    mode = raw.strip().lower()
    if mode not in FP8_MATHS:
        raise ValueError(f"{FP8_MATH_ENV}={raw!r}: expected one of {', '.join(FP8_MATHS)}")
    return mode


# SGLang 0.5.23's extend_attention_fwd keyword arguments beyond the ones unsupported_reason names: whether the
# kernel serves a value, and why not. Host-side hints are served at any value. tests/test_sglang_hook.py holds
# this table and the named ones to SGLang's real signature, so an argument SGLang adds cannot pass unseen.
EXTRA_ARGS = {
    "skip_prefix_custom_mask": (lambda v: bool(v), "a custom mask over the prefix as well "
                                                   "(skip_prefix_custom_mask=False)"),
    "lse_extend": (lambda v: v is None, "an LSE output (lse_extend)"),
    "skip_prefix": (lambda v: not v, "skip_prefix (a context-parallel partial)"),
    "skip_extend": (lambda v: not v, "skip_extend (a context-parallel partial)"),
    "page_size": (lambda v: v == 1, "page size {v} (page size 1 only)"),
    "score_mod": (lambda v: v is None, "a score_mod on the logits"),
    "aux_tensors": (lambda v: v is None, "score_mod aux tensors"),
    "extend_seq_lens_cpu": (lambda v: True, ""),  # a host-side copy of the extend lengths: a hint
    "identity_kv_indices": (lambda v: True, ""),  # a promise that kv_indices is dense; the kernel reads it anyway
}


def unsupported_reason(q, k_extend, v_extend, o, k_buffer, custom_mask, is_causal, logit_cap=0.0,
                       sliding_window_size=-1, sinks=None, window_kv_offsets=None, xai_temperature_len=-1,
                       mask_indptr=None, kv_dtypes: tuple[str, ...] = ("bf16",), **extra) -> str | None:
    """Why our kernel cannot serve this call (SGLang then falls back), or None when it can. Host metadata only.
    ``kv_dtypes``: the KV pools the kernel configuration serves (its ``Impl.kv_dtypes``). ``extra``: the keyword
    arguments of EXTRA_ARGS; any other name falls back as unknown."""
    for name, value in extra.items():
        if name not in EXTRA_ARGS:
            return (f"argument {name}={value!r} unknown to the hook (written against SGLang 0.5.23's "
                    "extend_attention_fwd)")
        served, why = EXTRA_ARGS[name]
        if not served(value):
            return why.format(v=value)
    pool = kv_dtype_of(k_buffer.dtype)
    if pool is None or pool.name not in kv_dtypes:
        return (f"KV pool dtype {k_buffer.dtype} (the hook serves {'/'.join(kv_dtypes)} pools here; the sm_120 "
                "kernel and v4 read fp8 ones)")
    if q.dim() != 3 or q.shape[-1] != D_QK or v_extend.shape[-1] != D_V or k_buffer.shape[1:] != (1, D_QK):
        return f"not an MLA shape (q {tuple(q.shape)}, v_extend {tuple(v_extend.shape)}, k_buffer " \
               f"{tuple(k_buffer.shape)}; expected 576-wide latent+rope rows and 512-wide V)"
    if q.dtype != torch.bfloat16 or o.dtype != torch.bfloat16:
        return f"activations in {q.dtype} (bfloat16 only)"
    if sliding_window_size is not None and sliding_window_size != -1:
        return f"sliding window {sliding_window_size}"
    if sinks is not None:
        return "attention sinks"
    if logit_cap:
        return f"logit cap {logit_cap}"
    if window_kv_offsets is not None:
        return "window KV offsets"
    if xai_temperature_len is not None and xai_temperature_len > 0:
        return "xai temperature scaling"
    if not is_causal and custom_mask is None:
        return "non-causal verify without a mask"
    if custom_mask is not None and custom_mask.dtype not in (torch.bool, torch.uint8):
        return f"custom_mask dtype {custom_mask.dtype}"
    if custom_mask is not None and mask_indptr is None:
        return "custom_mask without mask_indptr"
    return None


@dataclass
class HookStats:
    calls: int = 0
    served: int = 0
    fell_back: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # fall-backs per reason


class VerifyHook:
    """The callable SGLang's verify slot holds. State: the mode, the kernel (a
    :class:`~kdtree_lab.kernels.attention.VerifyAttention` planned for batch sizes 1..max_bs over the server's KV
    pool ``kv_dtype``, its workspace allocated once, here, outside capture), the validate buffers. A pool the
    configuration this GPU selects does not read is refused here and every call falls back, saying why once."""

    def __init__(self, mode: str | None = None, max_bs: int = 48, num_draft: int = 4, num_heads: int = 16,
                 device: str | torch.device = "cuda", tol: float | None = None, kv_dtype: str = "bf16",
                 impl: str = "cuda", fp8_math: str | None = None):
        from ..kernels import attention
        from ..kernels.impls import kv_refusal

        self.mode = parse_mode(mode)
        self.impl = parse_impl(impl)
        self.fp8_math = parse_fp8_math(fp8_math)
        self.max_bs, self.num_draft, self.num_heads = max_bs, num_draft, num_heads
        self.tol = tol if tol is not None else VALIDATE_TOL
        self.device = torch.device(device)
        self.stats = HookStats()
        self._reasons_logged: set[str] = set()
        self.attn = self.scratch = self.err = None
        self.kv_dtypes: tuple[str, ...] = ()
        self.refusal: str | None = None  # why every call falls back (the pool is not served here)
        if self.mode == "off":  # nothing to allocate: every call falls back
            return
        refused = kv_refusal(self.impl, kv_dtype)
        if refused:
            self.refusal = f"the {kv_dtype} KV pool: {refused}"
            return
        try:
            self.attn = attention.VerifyAttention(max_bs, num_draft, num_heads, kv_dtype, self.device, self.impl,
                                                  fp8_math=self.fp8_math)
            self.kv_dtypes = (self.attn.kv_dtype,)
            if tol is None:  # over an fp8 pool SGLang's kernel, the reference, rounds Q and P to e4m3: e4m3's tolerance
                self.tol = validate_tol(self.attn.kv_dtype == "fp8")
        except NoConfiguration as exc:
            self.refusal = f"the {kv_dtype} KV pool: {exc}"
            return
        self.scratch = (torch.empty(max_bs * num_draft, num_heads, D_V, dtype=torch.bfloat16, device=self.device)
                        if self.mode == "validate" else None)
        self.err = torch.zeros((), dtype=torch.float32, device=self.device)

    @property
    def workspace(self) -> torch.Tensor | None:
        return self.attn.workspace if self.attn is not None else None

    def nsplit(self, bs: int) -> int:
        """The split count of a call of ``bs`` requests (1 <= bs <= max_bs): the plan's."""
        return self.attn.nsplit(bs)

    def _fall_back(self, reason: str) -> bool:
        self.stats.fell_back += 1
        self.stats.reasons[reason] = self.stats.reasons.get(reason, 0) + 1
        if reason not in self._reasons_logged:
            self._reasons_logged.add(reason)
            log.warning("kdtree verify hook falls back to SGLang's kernel: %s", reason)
        return False

    def __call__(self, q, k_extend, v_extend, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                 is_causal, mask_indptr, max_extend_len, k_scale=1.0, v_scale=1.0, sm_scale=None, logit_cap=0.0,
                 sliding_window_size=-1, sinks=None, window_kv_offsets=None, xai_temperature_len=-1, max_bs=None,
                 **extra) -> bool:
        self.stats.calls += 1
        if self.mode == "off":
            return self._fall_back("mode off")
        if self.refusal:
            return self._fall_back(self.refusal)
        reason = unsupported_reason(q, k_extend, v_extend, o, k_buffer, custom_mask, is_causal, logit_cap,
                                    sliding_window_size, sinks, window_kv_offsets, xai_temperature_len, mask_indptr,
                                    kv_dtypes=self.kv_dtypes, **extra)
        bs = kv_indptr.shape[0] - 1
        if reason is None and (q.shape[1] != self.num_heads or max_extend_len != self.num_draft
                               or not 1 <= bs <= self.max_bs):
            reason = (f"shape outside the workspace (H={q.shape[1]}, N={max_extend_len}, bs={bs}; sized for "
                      f"H={self.num_heads}, N={self.num_draft}, max_bs={self.max_bs})")
        if reason:
            return self._fall_back(reason)
        scale = sm_scale if sm_scale is not None else KERNEL_DEFAULT_SM_SCALE  # as extend_attention_fwd
        ours = o if self.mode == "on" else self.scratch[: q.shape[0]]
        self.attn.run(q, k_extend, v_extend, k_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
                      ours, scale, k_scale, v_scale)
        self.stats.served += 1  # our kernel ran (in validate mode a failed check below still raises)
        if self.mode == "validate":
            from sglang.kernels.ops.attention.extend_attention import (
                extend_attention_fwd,
            )

            extend_attention_fwd(q, k_extend, v_extend, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
                                 custom_mask, is_causal, mask_indptr, max_extend_len, k_scale, v_scale,
                                 sm_scale=sm_scale)
            record_difference(self.err, ours, o)
            if not _capturing():
                self.check()
        return True

    def check(self, reset: bool = True) -> float:
        """validate mode: read the worst difference recorded since the last check (a host read: after the step,
        outside capture) and raise ValidationFailed past the tolerance."""
        if _capturing():
            raise RuntimeError("check() reads the device on the host; call it after replay, not under capture")
        worst = float(self.err.item())
        if reset:
            self.err.zero_()
        if worst > self.tol:
            raise ValidationFailed(f"kdtree verify kernel differs from SGLang's extend_attention_fwd: worst relative "
                                   f"difference {worst:.3g} > tolerance {self.tol:.3g}")
        return worst


def _capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (False without CUDA: a CPU build of torch raises)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _sglang_version() -> str:
    try:
        import sglang

        return sglang.__version__
    except Exception:
        return "not importable"


def install(backend, mode: str | None = None, num_heads: int | None = None, num_draft: int | None = None,
            max_bs: int | None = None, impl: str | None = None) -> VerifyHook:
    """Put a :class:`VerifyHook` into a live ``TritonAttnBackend``'s verify slot (workspace sized from the
    backend's max batch, allocated now, outside capture). ``num_heads``, ``num_draft``, ``max_bs``: plan for these
    instead of what the backend holds (a larger batch, another width then falls back); ``impl``: see the module
    docstring. Raises HookInstallError if the layout differs."""
    needed = ("verify_shared_kv_fwd", "use_verify_shared_kv", "req_to_token_pool")
    missing = [a for a in needed if not hasattr(backend, a)]
    if missing:
        raise HookInstallError(f"this {type(backend).__name__} lacks {missing}: the hook targets SGLang 0.5.23's "
                               f"TritonAttnBackend (installed SGLang: {_sglang_version()})")
    heads = num_heads or getattr(backend, "num_head", None)
    draft = num_draft or getattr(backend, "num_draft_tokens", None)
    if not heads or not draft:
        raise HookInstallError("cannot read the local head count (backend.num_head) or draft tokens "
                               "(backend.num_draft_tokens); pass num_heads= and num_draft=")
    device = getattr(backend, "device", "cuda")
    pool = kv_dtype_of(getattr(getattr(backend, "token_to_kv_pool", None), "dtype", None))
    hook = VerifyHook(mode, max_bs=int(max_bs or backend.req_to_token_pool.size), num_draft=int(draft),
                      num_heads=int(heads), device=device, kv_dtype=pool.name if pool else "bf16",
                      impl=parse_impl(impl))
    backend._kdtree_saved = (backend.verify_shared_kv_fwd, backend.use_verify_shared_kv)
    backend.verify_shared_kv_fwd = torch.compiler.disable(hook)
    backend.use_verify_shared_kv = hook.mode != "off"
    backend._kdtree_hook = hook
    return hook


def uninstall(backend) -> None:
    """Restore the backend's own verify slot."""
    saved = getattr(backend, "_kdtree_saved", None)
    if saved is None:
        raise HookInstallError("no kdtree verify hook is installed on this backend")
    backend.verify_shared_kv_fwd, backend.use_verify_shared_kv = saved
    del backend._kdtree_saved, backend._kdtree_hook
