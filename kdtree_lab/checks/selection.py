"""The launcher's per-shape choice held against the measured grids: for every shape of the newest committed issue
grids (``bench_results.committed_grid``), the configuration a GPU takes (``launch_plan.select``, which
tests/test_c_abi.py holds to the library's own choice), the fastest configuration that serves the shape over its
pool, and their ratio. A choice is made once per captured graph from (B, N, H) and the pool, never from the prefix
length, so a shape whose fastest configuration changes with L cannot be within a few percent at every L; the misses
are listed with their ratios (docs/performance.md, "Open targets").
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernels.impls import IMPLS
from ..kernels.launch_plan import Device, select
from .bench_presets import SM120_BF16
from .bench_results import committed_grid

# What may serve each pool on a 99 KB GPU (the RTX cards), by implementation name: the candidates the choice picks
# from. Every committed grid of a pool must hold rows of each (the issue-fp8 preset times the three fp8 ones together).
SM120_CANDIDATES = {"bf16": SM120_BF16, "fp8": ("cuda_sm120_e4m3", "cuda_sm120_e4m3_32", "cuda_sm120_fp8")}
TOLERANCE = 1.03  # issue 46: the configuration taken within 3% of the fastest


@dataclass(frozen=True)
class Choice:
    """One shape (B requests, prefix L, N draft nodes, H heads) over ``pool``: the implementation the launcher's
    choice runs, the fastest of the candidates, and the ratio of their measured times (>= 1)."""

    pool: str
    shape: tuple[int, int, int, int]  # (B, L, N, H)
    taken: str
    fastest: str
    ratio: float
    ms: dict  # candidate -> measured ms

    def line(self) -> str:
        b, length, n, h = self.shape
        return (f"{self.pool} B={b} L={length} N={n} H={h}: takes {self.taken} ({self.ms[self.taken]:.4f} ms), "
                f"{self.fastest} {self.ms[self.fastest]:.4f} ms ({self.ratio:.2f}x)")


def _impl_of(kernel: str) -> str:
    return next(i.name for i in IMPLS.values() if i.family == "cuda" and i.kernel == kernel)


def choices(device: Device, candidates: dict[str, tuple[str, ...]] = SM120_CANDIDATES) -> list[Choice]:
    """Every shape the committed grids time for all of a pool's candidates, with what ``device`` takes there under
    automatic fp8 math. Raises LookupError naming a candidate no committed grid holds."""
    out = []
    for pool, impls in candidates.items():
        times: dict[tuple, dict] = {}
        for impl in impls:
            for r in committed_grid(impl, pool).rows:
                times.setdefault((r["B"], r["L"], r["N"], r["H"]), {})[impl] = r["ms"]
        for shape, ms in sorted(times.items()):
            if len(ms) < len(impls):
                continue
            b, _, n, h = shape
            taken = _impl_of(select(b, n, h, pool, device).name)
            fastest = min(ms, key=ms.get)
            out.append(Choice(pool, shape, taken, fastest, ms[taken] / ms[fastest], ms))
    return out


def misses(device: Device, tolerance: float = TOLERANCE) -> list[Choice]:
    """The shapes where the configuration taken is more than ``tolerance`` times the fastest."""
    return [c for c in choices(device) if c.ratio > tolerance]
