"""The verify kernel's launch plan, a pure function of host integers: for each batch size (SGLang's capture sizes,
or 1..max_bs) the kernel configuration a call runs and its split count ``nsplit``, and the one workspace that
serves them all.

One home for these facts: :class:`~kdtree_lab.kernels.attention.VerifyAttention` (and through it the CUDA-graph
runner, the SGLang hook and the benchmark) and the memory budget take them from :func:`plan` (torch- and
ctypes-free, so the budget and the CLI use it without a GPU stack). The configuration comes from a ``select``
function of (bs, N, H, kv_dtype, device): the C library's own choice where the library is loaded
(``KernelLibrary.select``), else :func:`select`, this module's statement of the same rule, which
tests/test_c_abi.py holds equal to the library's answer over a grid of shapes, pools and devices. The C library
computes the same workspace (``kdtree_verify_workspace_bytes``) and caps the split count at the same
``MAX_NSPLIT``; tests/test_c_abi.py holds those equal too. The reasoning behind the split rule is in
docs/performance-history.md ("Wave-aware split counts", under v4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

from ..core.mla import D_QK, D_V

HEADER_BYTES = 256  # the workspace's header (the status word), kernels/common/frame.cuh HEADER_BYTES
Q8_ROWS_ALIGN = 64  # the e4m3 Q pass pads a request's rows to this, kernels/common/frame.cuh Q8_ROWS_ALIGN
MAX_NSPLIT = 512  # the C ABI's largest nsplit (kernels/common/frame.cuh MAX_NSPLIT)


def default_nsplit(bs: int, num_draft: int, num_heads: int, num_sms: int, row_tile: int = 64,
                   cta_overhead: float = 0.002, draft_tail: float = 0.001, cluster: int = 1) -> int:
    """The split count ``nsplit`` of a launch (each prefix is cut into ``nsplit`` ranges). The grid has
    ``tiles = bs * row_tiles * cluster`` CTAs per split (``row_tile`` rows of
    draft node x head each: the selected kernel configuration's block_m, served by ``cluster`` CTAs that share
    the tile's work) and ``nsplit`` prefix splits plus one
    draft-block split, over ``num_sms`` slots (every automatic configuration runs one CTA per SM). Costs are in
    units of one CTA walking a whole long prefix: a prefix CTA takes ``1 / nsplit`` of it plus ``cta_overhead``
    (its Q tile, its fp32 partial, its share of the reduce); the short draft-block CTAs (dispatched last where the
    grid does not fit one wave: kernels/common/frame.cuh setup_work) add ``draft_tail`` when the grid does not fit
    whole waves with them (those past the last full wave wait for the first CTAs to end). The choice minimises
    ``waves * (1 / nsplit + cta_overhead) (+ draft_tail)``: the headline (B=1, N=16, H=8, 64-row tiles) gets 65
    splits (130 prefix + 2 draft CTAs: one wave of 132), B=8 gets 8 (one wave of 128 prefix CTAs) rather than 9
    and a second wave of 12. Splits beyond about 4 waves are not considered (they grow the fp32 partials, i.e.
    the workspace, for little gain). The kernel still skips splits a short prefix does not need."""
    tiles = max(1, bs * math.ceil(num_draft * num_heads / row_tile) * cluster)
    slots = max(1, num_sms)
    top = min(MAX_NSPLIT, math.ceil(4 * slots / tiles))

    def cost(n: int) -> float:
        waves = math.ceil(tiles * n / slots)
        return waves * (1 / n + cta_overhead) + (draft_tail if tiles * (n + 1) > waves * slots else 0.0)

    return min(range(1, top + 1), key=cost)  # the first (smallest) of equal costs


def q8_rows(rows: int) -> int:
    """Rows the e4m3 Q pass keeps for a request of ``rows`` (N x H) rows: padded to ``Q8_ROWS_ALIGN``."""
    return math.ceil(rows / Q8_ROWS_ALIGN) * Q8_ROWS_ALIGN


def workspace_bytes(bs: int, num_draft: int, num_heads: int, nsplit: int, partial_bytes: int = 4) -> int:
    """Bytes of workspace a call needs: the header, then a partial output row (``D_V`` values of ``partial_bytes``)
    and an fp32 LSE (padded to 256 bytes) for every (request, split or draft block, draft node, head), then the e4m3
    Q pass's rows (each request's ``num_draft x num_heads`` padded to ``Q8_ROWS_ALIGN``): two e4m3 terms of ``D_QK``
    bytes each and an fp32 logit scale (padded to 256 bytes)."""
    rows = bs * (nsplit + 1) * num_draft * num_heads
    q8 = bs * q8_rows(num_draft * num_heads)
    return (HEADER_BYTES + rows * D_V * partial_bytes + math.ceil(rows * 4 / 256) * 256 + q8 * 2 * D_QK
            + math.ceil(q8 * 4 / 256) * 256)


class NoConfiguration(ValueError):
    """No kernel configuration serves this call on this device (the message says why)."""


@dataclass(frozen=True)
class Device:
    """What the configuration choice and the split rule read of a GPU."""

    sms: int  # streaming multiprocessors
    compute_capability: int  # major * 10 + minor: 90 (Hopper), 100 (B200), 120 (RTX PRO 6000, RTX 5090)
    smem_optin: int  # opt-in shared memory per block, bytes
    sm90a: bool = True  # the library holds sm_90a code (the default build, kdtree-lab build)


@dataclass(frozen=True)
class Config:
    """A kernel configuration as the plan needs it: its name in the library's table (``kdtree_verify_config_name``,
    ``Impl.kernel``; ``triton`` for the Triton twin), its row tile (rows of draft node x head) and the CTAs that
    serve one row tile (a thread-block cluster; 1: one CTA holds the whole tile)."""

    name: str
    block_m: int
    cluster: int = 1


Select = Callable[[int, int, int, str, Device], Config]  # (bs, num_draft, num_heads, kv_dtype, device) -> Config


@dataclass(frozen=True)
class AutoConfig:
    """One configuration the automatic choice may take, with the properties the choice reads: the compute
    capabilities it may run on ([lo, hi)), whether it needs sm_90a code, its dynamic shared memory per block, the
    rows (N x H, [lo, hi)) it serves, and the configuration an fp8 pool runs on it under exact math (None: it
    refuses fp8) and on e4m3 tensor cores (None: none; that math runs the exact one), which automatic fp8 math takes
    where ``e4m3_default``."""

    config: Config
    smem: int
    cc: tuple[int, int] = (0, 1 << 30)
    sm90a: bool = False
    rows: tuple[int, int] = (1, 1 << 30)
    fp8: Config | None = None
    fp8_e4m3: Config | None = None
    e4m3_default: bool = False


FP8_MATHS = ("auto", "exact", "e4m3")  # abi.FP8_MATH's names (this module stays ctypes-free)
E4M3_SM120 = Config("verify_sm120_e4m3_kernel<64>", 64)  # the e4m3 tensor-core configuration of 99 KB GPUs
E4M3_SM120_32 = Config("verify_sm120_e4m3_32_kernel", 32)  # its 32-row form (rows <= 32)
E4M3_CONFIGS = frozenset({E4M3_SM120.name, E4M3_SM120_32.name})  # configurations that round Q and P to e4m3 (their own tolerance)


# The launcher's automatic choice (kdtree_verify_select_config, then kdtree_verify_config_for_pool for the pool),
# in priority order: v5 on 9.x with sm_90a code; everywhere else the sm_120 kernel's second generation (64-row
# tiles split by role) above 32 rows and the first sm_120 kernel for the rest
# (docs/performance.md, "Per-shape choice on sm_120"); an fp8 pool runs the e4m3 tensor-core configuration (e4m3 fp8
# math, and automatic math above 32 rows) or the first kernel's exact e4m3 variant (exact math, and automatic math
# for 32 rows and fewer, where the e4m3 configuration's 64-row tile is half empty: docs/kernels.md, "fp8 pools").
# Stated here for planning without the library (the memory budget on a CPU); tests/test_c_abi.py holds select() to
# the library's answer over a grid, so a configuration the launcher adds to its choice is added here too.
# A configuration's smem is what it and the pool variants it switches to need (kdtree_verify_select_config's
# auto_smem): the role split's 99,432 B, its e4m3 variant's 100,968. The sm_120 configurations fit any GPU with
# 100,968 / 86,912 B of shared memory per block, so GPUs with Hopper-sized
# shared memory but no sm_90a code (B200, compute capability 10.0; an H100 or H200 under a library built without
# sm_90a) run them (v3 ran there until it left the table: commit 65e9dc4 is the last with it).
AUTO_CONFIGS = (
    AutoConfig(Config("verify_wgmma_v5_kernel<64>", 64), smem=231_424, cc=(90, 100), sm90a=True,
               fp8=Config("verify_wgmma_kernel<64,2,true>", 64)),
    AutoConfig(Config("verify_sm120_roles_kernel<64>", 64), smem=100_968, rows=(33, 1 << 30),
               fp8=Config("verify_sm120_kernel<32,2,true>", 32), fp8_e4m3=E4M3_SM120, e4m3_default=True),
    AutoConfig(Config("verify_sm120_kernel<32,2>", 32), smem=86_912, fp8=Config("verify_sm120_kernel<32,2,true>", 32),
               fp8_e4m3=E4M3_SM120_32, e4m3_default=True),
)


def select(bs: int, num_draft: int, num_heads: int, kv_dtype: str, device: Device, fp8_math: str = "auto") -> Config:
    """The configuration the launcher chooses for a call of ``bs`` requests of N x H rows over a ``kv_dtype`` pool
    on ``device``: the first of AUTO_CONFIGS whose arch, shared memory and rows fit, then the variant that reads
    the pool under ``fp8_math`` (FP8_MATHS). Raises NoConfiguration when none serves the call."""
    if fp8_math not in FP8_MATHS:
        raise ValueError(f"fp8_math: expected one of {', '.join(FP8_MATHS)}, found {fp8_math!r}")
    rows = num_draft * num_heads
    for auto in AUTO_CONFIGS:
        lo, hi = auto.cc
        if (lo <= device.compute_capability < hi and (device.sm90a or not auto.sm90a)
                and auto.smem <= device.smem_optin and auto.rows[0] <= rows < auto.rows[1]):
            if kv_dtype == "bf16":
                return auto.config
            e4m3 = fp8_math == "e4m3" or (fp8_math == "auto" and auto.e4m3_default)
            if kv_dtype == "fp8" and e4m3 and auto.fp8_e4m3 is not None:
                return auto.fp8_e4m3
            if kv_dtype == "fp8" and auto.fp8 is not None:
                return auto.fp8
            raise NoConfiguration(f"kv_dtype: {auto.config.name}, the configuration this device selects, does not "
                                  f"read {kv_dtype} pools")
    raise NoConfiguration(f"device: no kernel configuration fits {device.smem_optin} B of shared memory per block "
                          f"on compute capability {device.compute_capability}")


def fixed(config: Config) -> Select:
    """A ``select`` that always answers ``config`` (a forced configuration, the Triton twin, a recorded row tile)."""
    return lambda bs, num_draft, num_heads, kv_dtype, device: config


@dataclass(frozen=True)
class BatchPlan:
    """One batch size's launch: the configuration it runs, its split count and the workspace it needs (bytes)."""

    config: Config
    nsplit: int
    workspace_bytes: int


@dataclass(frozen=True)
class LaunchPlan:
    """The launch of each batch size and the one workspace (bytes) that serves them all."""

    num_draft: int
    num_heads: int
    kv_dtype: str
    batches: dict[int, BatchPlan]
    workspace_bytes: int

    def nsplit(self, bs: int) -> int:
        """The split count of a call of ``bs`` requests (a planned batch size)."""
        return self.batches[bs].nsplit

    def config(self, bs: int) -> Config:
        """The configuration a call of ``bs`` requests runs (a planned batch size)."""
        return self.batches[bs].config


def plan(batch_sizes: Iterable[int], num_draft: int, num_heads: int, kv_dtype: str, device: Device,
         nsplit: int = 0, partial_bytes: int = 4, select: Select = select) -> LaunchPlan:
    """The plan over ``batch_sizes``: per size, ``select``'s configuration and the split count (``nsplit`` > 0 fixes
    it; 0: ``default_nsplit`` at that configuration's row tile and the device's SM count). Raises ValueError
    naming a bad argument, NoConfiguration when no configuration serves a size."""
    sizes = sorted(set(batch_sizes))
    for name, value in (("num_draft", num_draft), ("num_heads", num_heads)):
        if value < 1:
            raise ValueError(f"{name}: expected an integer >= 1, found {value}")
    if not sizes or sizes[0] < 1:
        raise ValueError(f"batch_sizes: expected batch sizes >= 1, found {sizes}")
    if not 0 <= nsplit <= MAX_NSPLIT:
        raise ValueError(f"nsplit: expected 0 (the split rule) or 1..{MAX_NSPLIT}, found {nsplit}")
    batches = {}
    for bs in sizes:
        config = select(bs, num_draft, num_heads, kv_dtype, device)
        count = nsplit or default_nsplit(bs, num_draft, num_heads, device.sms, config.block_m, cluster=config.cluster)
        batches[bs] = BatchPlan(config, count, workspace_bytes(bs, num_draft, num_heads, count, partial_bytes))
    return LaunchPlan(num_draft, num_heads, kv_dtype, batches, max(b.workspace_bytes for b in batches.values()))
