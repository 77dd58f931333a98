"""Every GPU of a node, or of a cluster, through Dask distributed (an optional extra: ``pip install -e .[fleet]``).

One Dask worker per GPU, one thread each: a local cluster of worker processes (``LocalCluster``) on this host, or
the workers of a running scheduler (``--scheduler tcp://host:8786``). A task runs pinned to one worker and sets
``CUDA_VISIBLE_DEVICES`` to its GPU before anything touches CUDA in that process, so the kernels, the notebook
kernels it starts and their allocations all see only that card. ``parity`` and ``bench`` shard their grids over
the GPUs and merge the rows back in grid order, each row naming its GPU; ``run`` runs the notebook sequence once per
GPU. A lost worker (killed, crashed) leaves its GPU's entry saying so; the others finish, and what was written stays.

GPU lists: ``all`` (every GPU torch sees here), ``0,1,3``, or ``cpu:N`` (N CPU worker processes, no GPU pinned:
the CPU grids and the tests).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence


class FleetError(ValueError):
    """A GPU list or scheduler that cannot be used; the message names it."""


def require() -> None:
    """Raise FleetError unless Dask distributed imports (doctor.fleet_available reports it)."""
    from .doctor import fleet_available

    if fleet_available() is None:
        raise FleetError("--gpus needs Dask distributed (pip install -e .[fleet]); without it runs use one GPU")


def parse_gpus(spec: str, visible: int | None = None) -> list[str]:
    """``all`` | ``0,1,...`` | ``cpu:N`` -> worker labels ("0", "1", ... or "cpu0", "cpu1", ...)."""
    spec = spec.strip()
    if spec.startswith("cpu:"):
        n = spec[4:]
        if not n.isdigit() or int(n) < 1:
            raise FleetError(f"--gpus {spec}: expected cpu:N with N >= 1")
        return [f"cpu{i}" for i in range(int(n))]
    if visible is None:
        import torch

        visible = torch.cuda.device_count()
    if spec == "all":
        if visible < 1:
            raise FleetError("--gpus all: expected at least one CUDA GPU, found none (cpu:N runs CPU workers)")
        return [str(i) for i in range(visible)]
    ids = spec.split(",")
    if not all(i.isdigit() for i in ids) or len(set(ids)) != len(ids):
        raise FleetError(f"--gpus {spec}: expected all, cpu:N or distinct GPU indices such as 0,1")
    bad = [i for i in ids if int(i) >= visible]
    if bad:
        raise FleetError(f"--gpus {spec}: GPU {','.join(bad)} not found ({visible} visible)")
    return ids


@contextmanager
def cluster(n_workers: int, scheduler: str | None = None) -> Iterator[Any]:
    """A Dask client: a local cluster of ``n_workers`` single-thread worker processes, or a running scheduler."""
    require()
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler, timeout="30s") as client:
            yield client
        return
    import dask

    # a task whose worker dies is reported at once (KilledWorker), not retried on that GPU's restarted worker
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                         silence_logs=40) as local, Client(local) as client:
        yield client


def _pinned(label: str, fn: Callable, args: tuple) -> Any:
    """Run on a worker: pin the process to GPU ``label`` (CPU labels pin nothing), then call ``fn(*args)``."""
    if not label.startswith("cpu"):
        os.environ["CUDA_VISIBLE_DEVICES"] = label
    return fn(*args)


@dataclass
class Outcome:
    """What one GPU's share returned, or why it has none."""

    gpu: str
    value: Any = None
    error: str | None = None
    lost: bool = False


def per_gpu(client, gpus: Sequence[str], fn: Callable, args: Sequence[tuple]) -> list[Outcome]:
    """``fn(*args[i])`` on its own worker for GPU ``gpus[i]``; every outcome, in order, errors and lost workers
    included (a lost worker is reported, never retried on another GPU)."""
    from distributed import wait

    # pin by worker name: a worker restarted by its nanny keeps its name (not its address)
    workers = sorted((info.get("name", addr) for addr, info in client.scheduler_info()["workers"].items()), key=str)
    if len(workers) < len(gpus):
        raise FleetError(f"--gpus: {len(gpus)} GPUs need as many Dask workers, the cluster has {len(workers)}")
    futures = [client.submit(_pinned, g, fn, a, workers=[w], allow_other_workers=False, retries=0, pure=False)
               for g, w, a in zip(gpus, workers, args)]
    wait(futures)
    out = []
    for g, f in zip(gpus, futures):
        if f.status == "finished":
            out.append(Outcome(g, f.result()))
            continue
        exc = f.exception()
        lost = type(exc).__name__ == "KilledWorker"
        out.append(Outcome(g, error=("worker lost (killed or crashed) while running" if lost else
                                     f"{type(exc).__name__}: {exc}"), lost=lost))
    return out


def shard(items: Sequence, n: int) -> list[list]:
    """Round-robin ``items`` into ``n`` shards (item i to shard i % n), so each GPU gets a mix of small and large."""
    return [list(items[i::n]) for i in range(n)]


def unshard(shards: Sequence[Sequence], n_items: int) -> list:
    """Undo :func:`shard`: items back in their original order (a missing shard leaves its items out)."""
    out: list = [None] * n_items
    for s, items in enumerate(shards):
        for k, item in enumerate(items or []):
            out[s + k * len(shards)] = item
    return [x for x in out if x is not None]


@dataclass
class FleetReport:
    """Per-GPU outcomes and the merged rows."""

    gpus: list[str]
    outcomes: list[Outcome]
    rows: list[dict] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return all(o.error is None for o in self.outcomes)

    def summary(self) -> list[dict]:
        return [{"gpu": o.gpu, "status": "lost" if o.lost else "failed" if o.error else "done",
                 "error": o.error} for o in self.outcomes]


def _parity_shard(impl: str, cases: list, label: str) -> list[dict]:
    import torch

    from ..checks.parity import run_parity

    device = "cpu" if label.startswith("cpu") else "cuda"
    if device == "cuda":
        torch.cuda.set_device(0)  # the one GPU CUDA_VISIBLE_DEVICES leaves
    report = run_parity(impl, cases, device)
    return [r.row() | {"gpu": label} for r in report.results]


def parity(impl: str, cases: list, gpus: Sequence[str], scheduler: str | None = None) -> FleetReport:
    """The parity grid sharded over ``gpus``; rows back in grid order, each with its GPU."""
    shards = shard(cases, len(gpus))
    with cluster(len(gpus), scheduler) as client:
        outcomes = per_gpu(client, gpus, _parity_shard, [(impl, s, g) for s, g in zip(shards, gpus)])
    rows = unshard([o.value if o.error is None else [] for o in outcomes], len(cases))
    return FleetReport(list(gpus), outcomes, rows)


def _bench_shard(items: list, method: str, label: str) -> dict:
    """Time a shard of (shape, impls) pairs on this worker's GPU: its own ceilings, one row list per pair."""
    from dataclasses import asdict

    from ..checks.bench import run_grid
    from ..checks.timing import measure_ceilings

    ceilings = measure_ceilings()
    per_item = [[r | {"gpu": label} for r in run_grid([shape], impls, ceilings, progress=False, method=method)["rows"]]
                for shape, impls in items]
    return {"items": per_item, "ceilings": asdict(ceilings)}


def bench(items: list, gpus: Sequence[str], method: str = "graph", scheduler: str | None = None) -> FleetReport:
    """The benchmark grid ((shape, impls) pairs) sharded over ``gpus``; each GPU measures its own ceilings
    (``outcome.value["ceilings"]``), and each row keeps the GPU that timed it; rows in grid order."""
    shards = shard(items, len(gpus))
    with cluster(len(gpus), scheduler) as client:
        outcomes = per_gpu(client, gpus, _bench_shard, [(s, method, g) for s, g in zip(shards, gpus)])
    per_item = unshard([[] if o.error else o.value["items"] for o in outcomes], len(items))
    return FleetReport(list(gpus), outcomes, [r for rows in per_item for r in rows])


def _run_sequence(entries, profile, overrides, out_dir: str, timeout_s):
    from pathlib import Path

    from . import runner

    _, outcomes = runner.execute(entries, profile, overrides, Path(out_dir), progress=False, timeout_s=timeout_s)
    return [{"notebook": o.notebook, "status": o.status, "error": o.error, "figures": o.figures}
            for o in outcomes]


def run(entries, profile, overrides, run_dir, gpus: Sequence[str], scheduler: str | None = None,
        timeout_s: int | None = None) -> FleetReport:
    """The notebook sequence once per GPU, each under ``run_dir/gpu-<label>``; one comparison row per
    (GPU, notebook), figures that differ between GPUs flagged in :func:`compare`."""
    with cluster(len(gpus), scheduler) as client:
        outcomes = per_gpu(client, gpus, _run_sequence,
                           [(entries, profile, overrides, str(run_dir / f"gpu-{g}"), timeout_s) for g in gpus])
    rows = [row | {"gpu": o.gpu} for o in outcomes if o.error is None for row in o.value]
    return FleetReport(list(gpus), outcomes, rows)


def compare(rows: list[dict], spread: float = 0.2) -> list[dict]:
    """Per notebook and figure: the value on each GPU, flagged when a GPU differs from the median of the others
    by more than ``spread`` (numbers) or at all (anything else), or when the statuses differ."""
    import statistics

    out = []
    for nb in sorted({r["notebook"] for r in rows}):
        mine = [r for r in rows if r["notebook"] == nb]
        statuses = {r["gpu"]: r["status"] for r in mine}
        out.append({"notebook": nb, "figure": "status", "values": statuses,
                    "outlier": len(set(statuses.values())) > 1})
        for key in sorted({k for r in mine for k in (r.get("figures") or {})}):
            vals = {r["gpu"]: (r.get("figures") or {}).get(key) for r in mine}
            nums = [v for v in vals.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(nums) == len(vals) and nums:
                med = statistics.median(nums)
                odd = any(abs(v - med) > spread * max(abs(med), 1e-12) for v in nums)
            else:
                odd = len({str(v) for v in vals.values()}) > 1
            out.append({"notebook": nb, "figure": key, "values": vals, "outlier": odd})
    return out
