"""CUDA graphs for the verify call, captured the way SGLang's decode/verify runner does.

Persistent buffers sized for ``max_bs`` (N draft tokens, H heads, context ``ctx``), in SGLang's graph-variant
dtypes (int64 ``qo_indptr``, uint8 mask, ``kv_indices`` of ``max_bs*N*ctx``); the verify batch sizes SGLang
captures for speculative verify, largest first, into one shared memory pool; two eager warm-ups per size before
capture, with every row at prefix length 1 and slot 0 (as at SGLang's capture); replay after copying fresh data
into the buffers. The KV pool is bf16 or SGLang's fp8_e4m3 (``GraphConfig.kv``; its ``k_scale`` / ``v_scale`` are
captured as constants, as SGLang passes ``layer.k_scale_float``). Optionally the graph also runs a reference implementation and accumulates the worst relative
difference into a device scalar: a validate mode that works inside the graph (read it after replay).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..contract.spec import sglang_capture_sizes
from ..core.dtypes import KV_DTYPES
from ..core.mla import D_QK, D_V, MODEL_SM_SCALE
from ..kernels.attention import VerifyAttention
from ..kernels.impls import IMPLS
from ..kernels.validate import record_difference, validate_tol
from .batch import VerifyBatch


@dataclass(frozen=True)
class GraphConfig:
    """What the persistent buffers are sized for. ``ctx``: longest prefix (tokens); ``pool_size``: token slots."""

    max_bs: int = 48
    num_draft: int = 16
    num_heads: int = 8
    ctx: int = 1024
    pool_size: int | None = None
    impl: str = "cuda"
    mask: str = "tree"  # "tree" (uint8 mask buffer) or "causal" (custom_mask None)
    validate: bool = False  # also run the reference implementation in the graph and record the difference
    sizes: tuple[int, ...] = ()
    kv: str = "bf16"  # the KV pool, a dtypes.KV_DTYPES name: bf16 or fp8 (e4m3)
    k_scale: float = 1.0  # the pool's scales (fp8: per-tensor dequantisation factors; 1 for bf16)
    v_scale: float = 1.0

    def __post_init__(self):
        if self.kv not in KV_DTYPES:
            raise ValueError(f"kv: expected one of {', '.join(KV_DTYPES)}, found {self.kv!r}")

    @property
    def capture_sizes(self) -> list[int]:
        return sorted(self.sizes or sglang_capture_sizes(self.max_bs), reverse=True)

    @property
    def slots(self) -> int:
        return self.pool_size or self.max_bs * self.ctx


def pool_fields(kv: str) -> dict:
    """GraphConfig's pool fields for ``kv``, with the scales the benchmark uses (bench.pool_scales)."""
    from .bench import pool_scales

    k_scale, v_scale = pool_scales(kv)
    return {"kv": kv, "k_scale": k_scale, "v_scale": v_scale}


@dataclass
class CaptureStats:
    bs: int
    nsplit: int
    pool_bytes: int  # memory_reserved growth across this capture (bytes)
    workspace_bytes: int


class VerifyGraphRunner:
    """Owns the persistent buffers, the workspace and one CUDA graph per captured batch size."""

    def __init__(self, cfg: GraphConfig, device: str | torch.device = "cuda"):
        self.cfg, self.device = cfg, torch.device(device)
        n, h, mb = cfg.num_draft, cfg.num_heads, cfg.max_bs
        dev = self.device
        self.q = torch.zeros(mb * n, h, D_QK, dtype=torch.bfloat16, device=dev)
        self.k_extend = torch.zeros(mb * n, 1, D_QK, dtype=torch.bfloat16, device=dev)
        self.v_extend = torch.zeros(mb * n, 1, D_V, dtype=torch.bfloat16, device=dev)
        self.o = torch.zeros(mb * n, h, D_V, dtype=torch.bfloat16, device=dev)
        self.o_ref = torch.zeros_like(self.o)
        self.k_buffer = torch.zeros(cfg.slots + 1, 1, D_QK, dtype=KV_DTYPES[cfg.kv].torch, device=dev)
        self.qo_indptr = torch.zeros(mb + 1, dtype=torch.int64, device=dev)
        self.kv_indptr = torch.zeros(mb + 1, dtype=torch.int32, device=dev)
        self.kv_indices = torch.zeros(mb * n * cfg.ctx, dtype=torch.int64, device=dev)
        self.mask_indptr = torch.zeros(mb + 1, dtype=torch.int64, device=dev)
        self.custom_mask = (torch.ones(mb * n * (cfg.ctx + n), dtype=torch.uint8, device=dev)
                            if cfg.mask == "tree" else None)
        # the plan (a configuration and split count per captured size) and the workspace, chosen once, here
        self.attn = VerifyAttention(mb, n, h, cfg.kv, dev, cfg.impl, batch_sizes=cfg.capture_sizes)
        self.sms = self.attn.facts.sms
        self.block_m = self.attn.config(max(cfg.capture_sizes)).block_m
        self.workspace = self.attn.workspace
        other = "triton" if IMPLS[cfg.impl].family == "cuda" else "cuda"  # the validate mode's reference
        self.ref_attn = (VerifyAttention(mb, n, h, cfg.kv, dev, other, batch_sizes=cfg.capture_sizes)
                         if cfg.validate else None)
        self.err = torch.zeros((), dtype=torch.float32, device=dev)  # worst relative difference seen
        self.perturb = torch.zeros((), dtype=torch.bfloat16, device=dev)  # tests plant an error through this
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.stats: dict[int, CaptureStats] = {}
        self.pool = None
        self.addresses: dict[str, int] = {}

    # -- the call the graph holds -------------------------------------------------------------------------
    def _launch(self, bs: int, o: torch.Tensor | None = None, attn: VerifyAttention | None = None) -> torch.Tensor:
        n = self.cfg.num_draft
        out = (o if o is not None else self.o)[: bs * n]
        return (attn or self.attn).run(self.q[: bs * n], self.k_extend[: bs * n], self.v_extend[: bs * n],
                                       self.k_buffer, self.qo_indptr[: bs + 1], self.kv_indptr[: bs + 1],
                                       self.kv_indices, self.custom_mask, self.mask_indptr[: bs + 1], out,
                                       MODEL_SM_SCALE, self.cfg.k_scale, self.cfg.v_scale)

    def nsplit(self, bs: int) -> int:
        """The split count the graph of ``bs`` requests runs with (the plan's)."""
        return self.attn.nsplit(bs)

    def _step(self, bs: int) -> None:
        out = self._launch(bs)
        if self.cfg.validate:
            ref = self._launch(bs, o=self.o_ref, attn=self.ref_attn)
            out.add_(self.perturb)  # zero unless a test plants an error
            record_difference(self.err, out, ref)

    # -- capture ------------------------------------------------------------------------------------------
    def _fill_capture_rows(self, bs: int) -> None:
        """Every row at prefix length 1, slot 0, a causal-equivalent mask: SGLang's state at capture."""
        n = self.cfg.num_draft
        self.qo_indptr[: bs + 1].copy_(torch.arange(0, (bs + 1) * n, n, device=self.device))
        self.kv_indptr[: bs + 1].copy_(torch.arange(0, bs + 1, device=self.device, dtype=torch.int32))
        self.kv_indices[:bs].zero_()
        self.mask_indptr[: bs + 1].copy_(torch.arange(0, bs + 1, device=self.device) * n * (1 + n))
        if self.custom_mask is not None:
            self.custom_mask.fill_(1)

    def capture(self, warmups: int = 2) -> dict[int, CaptureStats]:
        """Capture every configured size, largest first, into one shared memory pool."""
        self.pool = torch.cuda.graph_pool_handle()
        for bs in self.cfg.capture_sizes:
            self._fill_capture_rows(bs)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(warmups):
                    self._step(bs)
            torch.cuda.current_stream(self.device).wait_stream(side)
            torch.cuda.synchronize(self.device)
            before = torch.cuda.memory_reserved(self.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                self._step(bs)
            torch.cuda.synchronize(self.device)
            self.graphs[bs] = graph
            self.stats[bs] = CaptureStats(bs, self.nsplit(bs), torch.cuda.memory_reserved(self.device) - before,
                                          self.workspace.numel())
        self.err.zero_()
        self.addresses = self.buffer_addresses()
        return self.stats

    def buffer_addresses(self) -> dict[str, int]:
        names = ["q", "k_extend", "v_extend", "o", "k_buffer", "qo_indptr", "kv_indptr", "kv_indices", "mask_indptr",
                 "workspace"] + (["custom_mask"] if self.custom_mask is not None else [])
        return {n: getattr(self, n).data_ptr() for n in names}

    # -- replay -------------------------------------------------------------------------------------------
    def load(self, batch: VerifyBatch) -> int:
        """Copy a capture-variant batch (padded to a captured size) into the persistent buffers; returns bs.
        Plain device copies: no host sync, no reallocation."""
        bs, n = batch.bs, self.cfg.num_draft
        if bs not in self.graphs:
            raise ValueError(f"batch size {bs} was not captured (captured: {sorted(self.graphs)})")
        if batch.max_extend_len != n or batch.num_heads != self.cfg.num_heads:
            raise ValueError(f"batch has N={batch.max_extend_len}, H={batch.num_heads}; graphs were captured for "
                             f"N={n}, H={self.cfg.num_heads}")
        if (batch.custom_mask is None) != (self.custom_mask is None):
            raise ValueError("mask kind differs from the captured one (tree mask buffer vs causal None)")
        if batch.k_buffer.dtype != self.k_buffer.dtype or (batch.k_scale, batch.v_scale) != (self.cfg.k_scale,
                                                                                              self.cfg.v_scale):
            raise ValueError(f"k_buffer: graphs hold a {self.k_buffer.dtype} pool with scales "
                             f"{(self.cfg.k_scale, self.cfg.v_scale)}, the batch has {batch.k_buffer.dtype} with "
                             f"{(batch.k_scale, batch.v_scale)}")
        if batch.k_buffer.shape[0] > self.k_buffer.shape[0]:
            raise ValueError(f"k_buffer: batch pool has {batch.k_buffer.shape[0]} rows, graphs hold "
                             f"{self.k_buffer.shape[0]}")
        self.q[: bs * n].copy_(batch.q)
        self.k_extend[: bs * n].copy_(batch.k_extend)
        self.v_extend[: bs * n].copy_(batch.v_extend)
        self.k_buffer[: batch.k_buffer.shape[0]].copy_(batch.k_buffer)
        self.qo_indptr[: bs + 1].copy_(batch.qo_indptr)
        self.kv_indptr[: bs + 1].copy_(batch.kv_indptr)
        m = min(batch.kv_indices.numel(), self.kv_indices.numel())
        self.kv_indices[:m].copy_(batch.kv_indices[:m])
        self.mask_indptr[: bs + 1].copy_(batch.mask_indptr)
        if self.custom_mask is not None:
            m = min(batch.custom_mask.numel(), self.custom_mask.numel())
            self.custom_mask[:m].copy_(batch.custom_mask[:m])
        return bs

    def replay(self, bs: int) -> torch.Tensor:
        self.graphs[bs].replay()
        return self.o[: bs * self.cfg.num_draft]

    def eager(self, bs: int, o: torch.Tensor) -> torch.Tensor:
        """The same call outside the graph, into ``o`` (for replay-vs-eager comparisons)."""
        return self._launch(bs, o=o)

    def validation_error(self, reset: bool = True) -> float:
        """The worst relative difference the in-graph validate mode recorded (host read: after replay)."""
        value = float(self.err.item())
        if reset:
            self.err.zero_()
        return value


@dataclass
class ReplayReport:
    sizes: list[int]
    replays_per_size: int
    mismatches_vs_eager: int = 0
    oracle_failures: int = 0
    addresses_stable: bool = True
    worst_rel_l2: float = 0.0
    eager_ms: dict[int, float] = field(default_factory=dict)
    replay_ms: dict[int, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.mismatches_vs_eager == 0 and self.oracle_failures == 0 and self.addresses_stable


def replay_parity(runner: VerifyGraphRunner, replays: int = 100, seed: int = 0, oracle_every: int = 1,
                  time_iters: int = 20) -> ReplayReport:
    """For every captured size: ``replays`` fresh random batches (live requests 1..bs, prefixes 1..ctx, new tree
    masks), each replayed and compared bit for bit with an eager call on the same buffers, and with the fp64
    oracle; buffer addresses checked after all replays; eager vs replay time per call."""
    import numpy as np

    from .batch import build_verify_batch
    from .oracle import compare, reference
    from .parity import within_tolerance
    from .timing import median_ms

    cfg = runner.cfg
    rng = np.random.default_rng(seed)
    rep = ReplayReport(sorted(runner.graphs), replays)
    o_eager = torch.empty_like(runner.o)
    for bs in sorted(runner.graphs):
        for k in range(replays):
            live = int(rng.integers(1, bs + 1))
            lens = [int(x) for x in rng.integers(1, cfg.ctx + 1, size=live)]
            batch = build_verify_batch(lens, cfg.num_draft, cfg.num_heads, variant="capture", padded_bs=bs,
                                       mask="tree" if cfg.mask == "tree" else "causal", pool_size=cfg.slots,
                                       ctx=cfg.ctx, seed=int(rng.integers(0, 2**31)), device=runner.device,
                                       kv_dtype=cfg.kv, k_scale=cfg.k_scale, v_scale=cfg.v_scale)
            runner.load(batch)
            runner.o.fill_(float("nan"))
            out = runner.replay(bs)
            o_eager.fill_(float("nan"))
            eager = runner.eager(bs, o_eager)
            rows = live * cfg.num_draft
            if not torch.equal(out[:rows], eager[:rows]):
                rep.mismatches_vs_eager += 1
                rep.failures.append(f"bs={bs} replay {k}: replay differs from eager")
            if k % oracle_every == 0:
                batch.o = out  # compare the graph's output with the oracle over the same inputs
                err = compare(out[:rows], reference(batch)[:rows])
                rep.worst_rel_l2 = max(rep.worst_rel_l2, err["rel_l2"])
                if not within_tolerance(err, runner.attn.e4m3_math):
                    rep.oracle_failures += 1
                    rep.failures.append(f"bs={bs} replay {k}: oracle rel_l2 {err['rel_l2']:.3g}")
        rep.eager_ms[bs] = median_ms(lambda _: runner.eager(bs, o_eager), 1, warmup=1, iters=time_iters)[0]
        rep.replay_ms[bs] = median_ms(lambda _: runner.replay(bs), 1, warmup=1, iters=time_iters)[0]
    rep.addresses_stable = runner.buffer_addresses() == runner.addresses
    return rep


@dataclass
class ChainReport:
    """What :func:`chained_calls` found: per replay and call, a mismatch with the same call run alone or an oracle
    failure (one line each), the worst relative L2 from the oracle, and the status flags the calls raised."""

    impl: str
    kv: str
    prefixes: tuple[int, ...]
    replays: int
    worst_rel_l2: float = 0.0
    flags: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and self.flags == 0


def chained_calls(impl: str = "cuda", kv: str = "bf16", prefixes: tuple[int, ...] = (4096, 128, 2048, 33, 4096),
                  num_draft: int = 4, num_heads: int = 8, replays: int = 20, seed: int = 0,
                  device: str | torch.device = "cuda", graph: bool = True) -> ChainReport:
    """Verify calls back to back in one CUDA graph on one stream, one request each at ``prefixes`` (tokens), through
    one :class:`VerifyAttention` and so one workspace, as a model's layers share one; each with its own inputs, pool
    and output. Replayed ``replays`` times, Q's rows permuted before each (new outputs) and every output poisoned
    with NaN: each call's output must equal bit for bit that of the same call run alone on the same inputs, and lie
    within tolerance of the fp64 oracle. The one-call graphs of :func:`replay_parity` cannot see what this does: a
    call whose kernels touch the workspace before the previous call's combine has finished reading it, or that
    reads another call's partial rows (programmatic dependent launch between calls). ``graph`` False runs the chain
    eagerly instead (the Triton twin on a CPU: the check's own test)."""
    from ..kernels.attention import batch_args
    from .batch import build_verify_batch
    from .bench import pool_scales
    from .oracle import compare, reference
    from .parity import within_tolerance

    dev = torch.device(device)
    k_scale, v_scale = pool_scales(kv)
    batches = [build_verify_batch([length], num_draft, num_heads, device=dev, seed=seed + i, kv_dtype=kv,
                                  k_scale=k_scale, v_scale=v_scale) for i, length in enumerate(prefixes)]
    attn = VerifyAttention(1, num_draft, num_heads, kv, impl=impl, device=dev)
    args = [batch_args(b) for b in batches]

    def chain():
        for a in args:
            attn.run(*a)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    chain()  # eager first: kernel attributes are set outside the capture
    sync()
    replay = chain
    if graph:
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured):
            chain()
        replay = captured.replay
    attn.clear_status()
    rep = ChainReport(impl, kv, tuple(prefixes), replays)
    gen = torch.Generator().manual_seed(seed)
    alone = [torch.empty_like(b.o) for b in batches]
    for r in range(replays):
        for b in batches:
            b.q.copy_(b.q[torch.randperm(b.q.shape[0], generator=gen).to(dev)])
            b.o.fill_(float("nan"))
        replay()
        sync()
        for i, (b, a) in enumerate(zip(batches, args)):
            alone[i].fill_(float("nan"))
            attn.run(*a[:9], alone[i], *a[10:])
            sync()
            where = f"replay {r}, call {i} (L {prefixes[i]})"
            if not torch.equal(b.o, alone[i]):
                rep.failures.append(f"{where}: differs from the same call run alone")
            err = compare(b.o, reference(b))
            rep.worst_rel_l2 = max(rep.worst_rel_l2, err["rel_l2"])
            if not within_tolerance(err, attn.e4m3_math):
                rep.failures.append(f"{where}: oracle rel_l2 {err['rel_l2']:.3g}, nan {err['nan']}")
    rep.flags = attn.status()
    return rep


def audit_verify_call(runner: VerifyGraphRunner, bs: int):
    """Capture-safety audit of the exact call a graph holds, with ``kv_indices`` and the mask buffer watched for
    Python-side shape reads (their lengths differ between capture and replay)."""
    from .capture_audit import CaptureAuditReport, audit_capture, watch

    report = CaptureAuditReport()
    saved = runner.kv_indices, runner.custom_mask
    watched = {"kv_indices": watch(runner.kv_indices, "kv_indices", report)}
    if runner.custom_mask is not None:
        watched["custom_mask"] = watch(runner.custom_mask, "custom_mask", report)
    runner.kv_indices, runner.custom_mask = watched["kv_indices"], watched.get("custom_mask")
    try:
        result = audit_capture(runner._launch, bs, watch_shapes=watched)
    finally:
        runner.kv_indices, runner.custom_mask = saved
    return result


def validate_in_graph(cfg: GraphConfig, sizes: tuple[int, ...] = (1, 8), seed: int = 0) -> list[dict]:
    """Capture with the in-graph validate mode, replay a fresh batch clean and with a planted error (the graph adds
    ``perturb`` to the output before comparing); the device-side flag must stay under tolerance, then trip."""
    from .batch import build_verify_batch

    runner = VerifyGraphRunner(GraphConfig(**{**cfg.__dict__, "validate": True, "sizes": sizes}))
    runner.capture()
    rows = []
    for bs in sizes:
        batch = build_verify_batch([cfg.ctx // 2] * bs, cfg.num_draft, cfg.num_heads, variant="capture",
                                   padded_bs=bs, mask="tree" if cfg.mask == "tree" else "causal",
                                   pool_size=cfg.slots, ctx=cfg.ctx, seed=seed + bs, device=runner.device,
                                   kv_dtype=cfg.kv, k_scale=cfg.k_scale, v_scale=cfg.v_scale)
        runner.load(batch)
        runner.replay(bs)
        clean = runner.validation_error()
        runner.perturb.fill_(1.0)
        runner.replay(bs)
        planted = runner.validation_error()
        runner.perturb.zero_()
        tol = validate_tol(runner.attn.e4m3_math)
        rows.append({"bs": bs, "clean_error": clean, "planted_error": planted, "tolerance": tol,
                     "clean_ok": clean <= tol, "planted_caught": planted > tol})
    return rows


def enablement(cfg: GraphConfig, replays: int = 100, seed: int = 0) -> dict:
    """Everything notebook 05 proves on a GPU: capture all sizes (memory per size), audit the captured call,
    replay parity vs eager and the oracle, eager-vs-replay time, and the in-graph validate mode."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_reserved()
    runner = VerifyGraphRunner(cfg)
    buffers = torch.cuda.memory_reserved() - base
    stats = runner.capture()
    audit = audit_verify_call(runner, max(runner.graphs))
    rep = replay_parity(runner, replays=replays, seed=seed)
    validate = validate_in_graph(cfg, seed=seed)
    return {
        "config": cfg.__dict__ | {"capture_sizes": cfg.capture_sizes},
        "sms": runner.sms,
        "block_m": runner.block_m,
        "capture": [s.__dict__ for s in sorted(stats.values(), key=lambda s: s.bs)],
        "graph_pool_bytes_total": sum(s.pool_bytes for s in stats.values()),
        "persistent_buffer_bytes": buffers,
        "workspace_bytes": runner.workspace.numel(),
        "audit": [f.__dict__ for f in audit.findings], "audit_capture_safe": audit.capture_safe,
        "replay": rep.__dict__ | {"ok": rep.ok},
        "validate_in_graph": validate,
    }


def graph_checks(result: dict | None, plants: list[dict], label: str = "") -> list[dict]:
    """The named pass/fail checks of notebook 05 and ``kdtree-lab capture``: every planted capture hazard caught
    by the audit, and (when ``result`` from :func:`enablement` is given) replays matching eager and the oracle
    with stable addresses, a capture-safe call, the in-graph validate mode clean and catching a planted error.
    ``label`` prefixes the names of the checks on ``result`` (notebook 05: the pool, for every pool after the first)."""
    checks = [{"name": f"audit catches: {p['planted']}", "ok": bool(p["caught"])} for p in plants]
    if result:
        checks += [{"name": f"{label}replays match eager and the oracle, addresses stable",
                    "ok": bool(result["replay"]["ok"])},
                   {"name": f"{label}the captured call is capture-safe", "ok": bool(result["audit_capture_safe"])},
                   {"name": f"{label}validate-in-graph clean and catches a planted error",
                    "ok": all(r["clean_ok"] and r["planted_caught"] for r in result["validate_in_graph"])}]
    return checks
