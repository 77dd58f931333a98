"""b12x's dense MLA (PyPI ``b12x`` 1.5.1, CuTe DSL, built for SM120/121) as the closest sm_120 peer on causal rows.
The adapter was written against that wheel, whose dense_mla is GitHub master 36bce2c1.

``b12x.attention.dense_mla`` in verify mode attends the query rows of each request over a paged 576/512 latent cache
that already holds them, right-aligned and causal (row i of N sees cache positions ``<= L + i``), split-K with a
merge, bf16 or e4m3 records (one scale for K and V; a bf16 Q over an e4m3 cache is quantised to e4m3 at a static
``q_scale`` by a kernel of its own, part of the call). Its masks are causal or a window: no tree, so it is timed on
chains (EAGLE topk 1, DFlash as SGLang 0.5.23 verifies it) at equal rows, the batch laid out by
:func:`kdtree_lab.checks.paged.paged` (page size 1 by default: SGLang's token pool, what our kernel reads).

The lower layer is used, as b12x's own tests do: ``_scratch.plan_dense_mla_scratch(Caps(...))`` -> ``Plan.bind`` ->
``_kernel.compile_dense_mla`` -> ``_kernel.run_dense_mla`` (the public ``run`` needs a ``PreparationSession``, which
adds autotuning and a compile pool, not different kernels). Nothing in that path checks the GPU's architecture
(``is_supported`` says SM12x, and nothing calls it); CuTe DSL compiles for the device it finds, sm_90a on the H200,
and the kernels use ``mma.sync`` (bf16, e4m3), ``ldmatrix``, ``cp.async`` and a bulk copy with an mbarrier, all of
which sm_90 has. ``load`` returns the exact error where it does not import, so a benchmark records it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch

from ..core.mla import D_V
from .batch import VerifyBatch
from .paged import PagedBatch, paged_reference
from .paged import paged as paged_layout

E4M3_MAX = torch.finfo(torch.float8_e4m3fn).max  # 448


@dataclass
class Prepared:
    """One compiled b12x call: ``run()`` launches its kernels (Q quantisation, forward, merge) and returns ``out``,
    the output [B * N, H, 512] bf16 it writes; ``splits`` is the split count b12x planned."""

    run: Callable[[], torch.Tensor]
    splits: int
    paged: PagedBatch
    out: torch.Tensor


def load() -> tuple[object | None, str | None]:
    """(b12x's dense_mla internals as a namespace, None), or (None, the exact error of importing them). The
    namespace's ``version`` is the installed distribution's."""
    try:
        from importlib.metadata import version

        from b12x.attention.dense_mla import _kernel, _scratch

        return type("B12x", (), {"version": version("b12x"), "kernel": _kernel, "scratch": _scratch}), None
    except Exception as exc:  # noqa: BLE001 - the error is the result
        return None, f"{type(exc).__name__}: {exc}"


def paged(batch: VerifyBatch, page: int = 1, seed: int = 0) -> PagedBatch:
    """``batch`` (chain or causal rows, equal N per request) as b12x reads it: ``page``-token pages (1, or a
    multiple of 16)."""
    if page != 1 and page % 16:
        raise ValueError(f"page: b12x's dense MLA takes pages of 1 or a multiple of 16 tokens, found {page}")
    return paged_layout(batch, page, seed, who="b12x's dense MLA")


def q_scale(q: torch.Tensor) -> float:
    """A static e4m3 scale for ``q`` (its largest magnitude at e4m3's largest finite value), as a calibrated
    checkpoint would pass."""
    return max(float(q.abs().max()) / E4M3_MAX, 1e-12)


def row_inputs(p: PagedBatch) -> dict[str, torch.Tensor]:
    """The inputs b12x takes beside the layout: ``cu_seqlens_q`` (int32 [B + 1], N rows per request) and, over an
    e4m3 cache, ``kv_scale`` (the cache's, K and V) and ``q_scale`` (:func:`q_scale`), fp32 [1] each."""
    bs, n, _ = p.shape
    dev = p.q.device
    out = {"cu_seqlens_q": torch.arange(0, (bs + 1) * n, n, dtype=torch.int32, device=dev)}
    if p.cache.dtype == torch.float8_e4m3fn:
        out["kv_scale"] = torch.tensor([p.scale], dtype=torch.float32, device=dev)
        out["q_scale"] = torch.tensor([q_scale(p.q)], dtype=torch.float32, device=dev)
    return out


def prepare(b12x, p: PagedBatch) -> Prepared:
    """Plan, bind and compile b12x's verify-mode dense MLA for ``p`` (plan capacities equal to the shape, so the
    split count is the one b12x picks for this context); the output buffer is poisoned with NaN."""
    bs, n, h = p.shape
    dev = p.q.device
    caps = b12x.scratch.Caps(device=dev, mode="verify", kv_dtype=p.cache.dtype, q_dtype=torch.bfloat16,
                             num_q_heads=h, page_size=p.page, max_total_q=bs * n, max_batch=bs,
                             max_cache_tokens=int(p.seqlens.max()), max_page_table_width=p.table.shape[1],
                             num_cache_pages=p.cache.shape[0], use_cuda_graph=True)
    plan = b12x.scratch.plan_dense_mla_scratch(caps)
    spec = plan.scratch_specs()[0]
    scratch = torch.zeros(spec.shape, dtype=spec.dtype, device=dev)
    out = torch.full((bs * n, h, D_V), float("nan"), dtype=torch.bfloat16, device=dev)
    binding = plan.bind(scratch=scratch, q=p.q, kv_cache=p.cache, output=out, page_table=p.table,
                        cache_seqlens=p.seqlens, sm_scale=p.sm_scale, **row_inputs(p))
    b12x.kernel.compile_dense_mla(binding=binding)

    def run() -> torch.Tensor:
        return b12x.kernel.run_dense_mla(binding=binding)[0]

    return Prepared(run, plan.num_splits, p, out)


def reference(p: PagedBatch) -> torch.Tensor:
    """fp64 attention over ``p`` as b12x computes it: over an e4m3 cache Q is first rounded to e4m3 at
    :func:`q_scale`, multiplied by its fp32 reciprocal as b12x's quantisation kernel does (so the comparison judges
    its attention, not the choice to round Q)."""
    if p.cache.dtype != torch.float8_e4m3fn:
        return paged_reference(p)
    s = torch.tensor(q_scale(p.q), dtype=torch.float32)
    q = (p.q.float() * s.reciprocal().to(p.q.device)).to(torch.float8_e4m3fn).float() * s.to(p.q.device)
    return paged_reference(replace(p, q=q))  # fp32 Q: paged_reference reads it in fp64
