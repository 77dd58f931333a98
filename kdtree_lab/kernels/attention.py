"""The verify kernel's public Python API: :class:`VerifyAttention`, one owner of the launch plan and the workspace.

Construction runs on the host once: it chooses, per batch size, the kernel configuration and the split count
(``launch_plan.plan``) and allocates the workspace. :meth:`VerifyAttention.run` then takes a verify step's buffers
in SGLang's layout and writes ``o``; it allocates nothing, never syncs and reads no device data on the host, so it
can be captured in a CUDA graph. The CUDA-graph runner, the SGLang hook, the benchmark and parity run the kernels
through it; another engine (vLLM, a custom server) calls it the same way (README, "Calling the kernel from another
engine").
"""

from __future__ import annotations

import functools
import numbers
from typing import Callable, Iterable

import torch

from ..core import dtypes, env
from . import dispatch
from .abi import FP8_MATH
from .buffers import check_buffers
from .impls import IMPLS, kv_refusal
from .launch_plan import E4M3_CONFIGS, Config, Device, LaunchPlan, Select, fixed, plan


class VerifyAttention:
    """Tree-verify attention for MLA (576-wide latent + rope keys, 512-wide values) over a paged KV pool.

    Parameters
    ----------
    max_bs : int
        The largest batch (requests per call).
    num_draft : int
        N, the draft tokens (tree nodes) of each request.
    num_heads : int
        H, the query heads on this GPU (after tensor parallelism).
    kv_dtype : {"bf16", "fp8"}
        The KV pool: bf16, or fp8 for SGLang's ``--kv-cache-dtype fp8_e4m3`` pool (float8_e4m3fn).
    device : str, torch.device or None
        Where the workspace lives (default: the current CUDA device).
    impl : str
        A name of ``kdtree_lab.kernels.impls.IMPLS``: ``"cuda"`` (the configuration the library chooses for each
        batch size on this GPU), a forced configuration (``"cuda_sm120"``, ``"cuda_wgmma_v5"``, ...), or
        ``"triton"`` (the Triton twin; on a CPU under ``TRITON_INTERPRET=1``).
    nsplit : int
        The split count (prefix ranges per request): 0, the default, chooses it per batch size
        (``launch_plan.default_nsplit``); a value in 1..512 fixes it for every size.
    batch_sizes : iterable of int, optional
        The batch sizes to plan, e.g. SGLang's capture sizes (default: 1..max_bs); :meth:`run` serves only these.
    fp8_math : {"auto", "exact", "e4m3"}
        How an fp8 pool is multiplied: ``"exact"`` converts e4m3 to bf16 / f16 (rel. error ~2e-3); ``"e4m3"`` rounds Q
        (per row) and P to e4m3 and runs e4m3 tensor cores (~2x faster on sm_120; rel. error up to ~6e-2, never
        above SGLang's own fp8 kernel's on the measured grid); ``"auto"`` (the default) takes e4m3 where the
        configuration declares it its default (sm_120 / 99 KB GPUs), exact elsewhere (docs/kernels.md, "fp8 pools").

    Attributes
    ----------
    plan : LaunchPlan
        Per batch size the configuration and split count, and the workspace bytes.
    workspace : torch.Tensor
        uint8 [plan.workspace_bytes] on ``device``, zeroed; its first word holds the kernel's status flags.

    Raises
    ------
    ValueError
        In one line naming the parameter, for a bad size, an unknown pool or implementation, a pool the
        implementation does not read (``launch_plan.NoConfiguration``), a CUDA device or implementation without a
        GPU, or the Triton twin on a CPU outside Triton's interpreter (``TRITON_INTERPRET=1``); each says what to do.
    """

    def __init__(self, max_bs: int, num_draft: int, num_heads: int, kv_dtype: str = "bf16",
                 device: str | torch.device | None = None, impl: str = "cuda", nsplit: int = 0,
                 batch_sizes: Iterable[int] | None = None, fp8_math: str = "auto"):
        if isinstance(max_bs, bool) or not isinstance(max_bs, numbers.Integral) or max_bs < 1:
            raise ValueError(f"max_bs: expected an integer >= 1, found {max_bs!r}")
        max_bs = int(max_bs)
        pool = dtypes.kv_dtype(kv_dtype)
        if impl not in IMPLS:
            raise ValueError(f"impl: expected one of {', '.join(IMPLS)}, found {impl!r}")
        refusal = kv_refusal(impl, pool.name)
        if refusal:
            raise ValueError(f"kv_dtype: {refusal}")
        if IMPLS[impl].family == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"impl: {impl} runs on a CUDA GPU, found {env.no_gpu_here()}; {env.CPU_HINT}")
        self.device = env.torch_device(device if device is not None else "cuda")
        if IMPLS[impl].family == "cuda" and self.device.type != "cuda":
            raise ValueError(f"device: impl {impl} runs on a CUDA GPU, found device {str(self.device)!r}; pass "
                             "device='cuda' (or impl='triton' for the CPU)")
        if self.device.type == "cpu" and (problem := env.triton_cpu_problem()):
            raise ValueError(problem)
        sizes = sorted(set(batch_sizes)) if batch_sizes is not None else list(range(1, max_bs + 1))
        if sizes and (sizes[0] < 1 or sizes[-1] > max_bs):
            raise ValueError(f"batch_sizes: expected sizes in 1..max_bs={max_bs}, found {sizes}")
        self.max_bs, self.num_draft, self.num_heads, self.kv_dtype, self.impl = max_bs, num_draft, num_heads, \
            pool.name, impl
        if fp8_math not in FP8_MATH:
            raise ValueError(f"fp8_math: expected one of {', '.join(FP8_MATH)}, found {fp8_math!r}")
        self.fp8_math = fp8_math
        self.facts, select = _device_and_select(impl, pool.name, self.device, fp8_math)
        self.plan: LaunchPlan = plan(sizes, num_draft, num_heads, pool.name, self.facts, nsplit, select=select)
        self._pool_dtype = pool.torch
        self.workspace = torch.zeros(self.plan.workspace_bytes, dtype=torch.uint8, device=self.device)
        self._no_mask_indptr = torch.zeros(max_bs + 1, dtype=torch.int64, device=self.device)  # causal calls

    @property
    def e4m3_math(self) -> bool:
        """Whether a planned call runs e4m3 tensor-core math (Q and P rounded to e4m3): its tolerance is e4m3's."""
        return any(b.config.name in E4M3_CONFIGS for b in self.plan.batches.values())

    def nsplit(self, bs: int) -> int:
        """The split count a call of ``bs`` requests runs with."""
        return self.plan.nsplit(bs)

    def config(self, bs: int) -> Config:
        """The kernel configuration a call of ``bs`` requests runs."""
        return self.plan.config(bs)

    def run(self, q: torch.Tensor, k_extend: torch.Tensor, v_extend: torch.Tensor, k_buffer: torch.Tensor,
            qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor,
            custom_mask: torch.Tensor | None, mask_indptr: torch.Tensor | None, o: torch.Tensor, sm_scale: float,
            k_scale: float = 1.0, v_scale: float = 1.0) -> torch.Tensor:
        """One verify step of ``bs = kv_indptr.numel() - 1`` requests (a planned batch size): writes and returns ``o``.

        Launches on the current stream; allocates nothing, never syncs, reads no device data on the host, so it
        can be captured in a CUDA graph (capture the sizes you planned).

        Parameters
        ----------
        q : torch.Tensor
            bfloat16 [bs * N, H, 576]: the draft tokens' queries (latent 512 + rope 64), last dim contiguous.
        k_extend, v_extend : torch.Tensor
            bfloat16 [bs * N, 1, 576] and [bs * N, 1, 512]: the draft tokens' own keys and values.
        k_buffer : torch.Tensor
            The KV pool [P, 1, 576] of ``kv_dtype`` (bfloat16 or float8_e4m3fn), last dim contiguous; the values
            are its first 512 columns. Slot 0 is read for out-of-pool indices (and flagged in the status word).
        qo_indptr : torch.Tensor
            int32 or int64 [bs + 1]: request r's draft tokens are rows qo_indptr[r] .. qo_indptr[r + 1] (N each).
        kv_indptr : torch.Tensor
            int32 [bs + 1]: request r's prefix slots are kv_indices[kv_indptr[r] : kv_indptr[r + 1]].
        kv_indices : torch.Tensor
            int64 [>= kv_indptr[bs]]: pool slots of the prefixes (may be longer than its valid part).
        custom_mask : torch.Tensor or None
            bool or uint8, contiguous: request r's N x (L_r + N) tree mask (row-major) at mask_indptr[r]; None:
            causal over the draft block.
        mask_indptr : torch.Tensor or None
            int64 [bs + 1]: where each request's mask starts; None with a causal call.
        o : torch.Tensor
            bfloat16 [bs * N, H, 512]: the output, written.
        sm_scale : float
            The softmax scale of the logits (MLA: 1 / sqrt(192) for DeepSeek-V3 / Kimi K2, times YaRN's mscale^2).
        k_scale, v_scale : float
            The fp8 pool's dequantisation factors (SGLang's ``layer.k_scale_float``); 1.0 for bf16.

        Returns
        -------
        torch.Tensor
            ``o``.

        Raises
        ------
        ValueError
            In one line naming the buffer: an unplanned batch size, another N, H or pool dtype, a dtype, shape,
            layout or device the kernel does not read.
        """
        bs = kv_indptr.shape[0] - 1
        if bs not in self.plan.batches:
            raise ValueError(f"kv_indptr: a batch of {bs} requests was not planned (planned: "
                             f"{_ranges(sorted(self.plan.batches))})")
        if mask_indptr is None:  # a causal call: the kernel reads no mask offsets, but takes a buffer
            if custom_mask is not None:
                raise ValueError("mask_indptr: expected int64 [bs + 1] with a custom_mask, found None")
            mask_indptr = self._no_mask_indptr[: bs + 1]
        if q.dim() == 3 and q.shape[1] != self.num_heads:
            raise ValueError(f"q: expected H={self.num_heads} heads, found {q.shape[1]}")
        check_buffers(q, k_extend, v_extend, o, k_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
                      self.num_draft, self.workspace, self.plan.batches[bs].workspace_bytes, self.device.type)
        if k_buffer.dtype != self._pool_dtype:
            raise ValueError(f"k_buffer: expected a {self.kv_dtype} pool ({self._pool_dtype}), found {k_buffer.dtype}")
        nsplit = self.plan.nsplit(bs)
        dispatch.launch(self.impl, q, k_extend, v_extend, o, k_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                        mask_indptr, self.num_draft, nsplit, float(sm_scale), float(k_scale), float(v_scale),
                        self.workspace, fp8_math=self.fp8_math)
        return o

    def status(self) -> int:
        """The status flags (``abi.FLAG_*``) the kernel OR-ed into the workspace since the last clear: a host read
        (syncs), for after the step."""
        return dispatch.read_status(self.workspace)

    def clear_status(self) -> None:
        """Zero the status word (a device memset: capture-safe)."""
        dispatch.clear_status(self.workspace)

    def __repr__(self) -> str:
        sizes = sorted(self.plan.batches)
        return (f"VerifyAttention(max_bs={self.max_bs}, num_draft={self.num_draft}, num_heads={self.num_heads}, "
                f"kv_dtype={self.kv_dtype!r}, device={str(self.device)!r}, impl={self.impl!r}; "
                f"{self.config(sizes[-1]).name}, nsplit {self.nsplit(sizes[0])}..{self.nsplit(sizes[-1])} over "
                f"bs {_ranges(sizes)}, workspace {self.plan.workspace_bytes} B)")


def _ranges(sizes: list[int]) -> str:
    return f"{sizes[0]}..{sizes[-1]}" if sizes == list(range(sizes[0], sizes[-1] + 1)) else ",".join(map(str, sizes))


def _device_and_select(impl: str, kv: str, device: torch.device, fp8_math: str = "auto") -> tuple[Device, Select]:
    """The device facts the plan reads and the configuration choice of ``impl``: the library's own for ``cuda``,
    the forced configuration (its variant for the pool and ``fp8_math``) for another CUDA impl, the twin's row tile
    for triton."""
    if IMPLS[impl].family == "cuda":
        from . import loader

        facts, lib = loader.device_facts(device), loader.library()
        kernel = IMPLS[impl].kernel or loader.forced_config()  # cuda under force_config runs the forced one
        if kernel is None:
            return facts, functools.partial(lib.select, fp8_math=fp8_math)
        return facts, fixed(lib.forced(kernel, kv, fp8_math))
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts = Device(props.multi_processor_count, props.major * 10 + props.minor,
                       int(props.shared_memory_per_block_optin), sm90a=False)
    else:  # the Triton interpreter on a CPU: one "SM", the split rule then picks few splits
        facts = Device(1, 0, 0, sm90a=False)
    return facts, fixed(Config("triton", dispatch.TRITON_ROW_TILE))


def e4m3_math(impl: str, kv_dtype: str, bs: int, num_draft: int, num_heads: int, device: str | torch.device,
              fp8_math: str = "auto") -> bool:
    """Whether ``impl`` runs a call of (bs, N, H) over a ``kv_dtype`` pool on ``device`` with e4m3 tensor-core math
    (the configuration the plan takes is one of launch_plan.E4M3_CONFIGS)."""
    if kv_dtype != "fp8" or IMPLS[impl].family != "cuda":
        return False
    facts, select = _device_and_select(impl, kv_dtype, torch.device(device), fp8_math)
    return select(bs, num_draft, num_heads, kv_dtype, facts).name in E4M3_CONFIGS


def runner(impl: str, fp8_math: str = "auto") -> Callable:
    """A function (batch, nsplit) -> (output, device status flags) that runs ``impl`` on a
    :class:`~kdtree_lab.checks.batch.VerifyBatch` at that split count, with a fresh plan and workspace."""
    dispatch.check_impl(impl)

    def run(batch, nsplit: int):
        pool = dtypes.kv_dtype_of(batch.k_buffer.dtype)
        attn = VerifyAttention(batch.bs, batch.max_extend_len, batch.num_heads, pool.name if pool else "bf16",
                               batch.q.device, impl, nsplit=nsplit, batch_sizes=(batch.bs,), fp8_math=fp8_math)
        attn.run(*batch_args(batch))
        return batch.o, attn.status()

    return run


def output_fn(impl: str, nsplit: int = 4) -> Callable:
    """A function batch -> output (``nsplit`` splits, a fresh workspace): what notebook 03's validate demo wraps."""
    run = runner(impl)
    return lambda batch: run(batch, nsplit)[0]


def batch_args(batch) -> tuple:
    """:meth:`VerifyAttention.run`'s positional arguments from a :class:`~kdtree_lab.checks.batch.VerifyBatch`."""
    return (batch.q, batch.k_extend, batch.v_extend, batch.k_buffer, batch.qo_indptr, batch.kv_indptr,
            batch.kv_indices, batch.custom_mask, batch.mask_indptr, batch.o, batch.sm_scale, batch.k_scale,
            batch.v_scale)
