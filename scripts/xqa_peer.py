"""The vendor peer (GPU): NVIDIA's XQA MLA decode kernel beside our kernel configurations on the same rows, one run.

XQA MLA (FlashInfer 0.7.4's ``mla_sm120.cu``, NVIDIA's 99 KB MLA kernel: a 4-CTA cluster split by role) is built
unchanged from the sources ``scripts/fetch_xqa.sh`` put in ``.xqa/`` (scripts/xqa_source.py, scripts/xqa_harness.cu)
for this GPU's arch, bf16 and, where it compiles, fp8, and called through its own ``launchMLA`` with its split-KV
(multi-block) mode. It serves one shape family only: one query token x 128 heads per request, so every row here is
that. The same rows for both:

* ours: B requests of N = 1 draft node x H = 128 heads (128 rows each) over a prefix of L pool slots plus the node
  itself (our API needs N >= 1; custom_mask None, so the one-node block is causal), SGLang's page-size-1 pool.
* XQA MLA: one query token x 128 heads over a paged cache of the same L + 1 latent rows (the prefix rows in the
  order kv_indices lists them, then the token's own k_extend row), 64 tokens per page (--page-size), pages in a
  shuffled order; K and V are the same rows (V: the first 512 elements). Its split count per request is
  launchMLA's rule, min(max(1, (SMs // 4) // B * 4), ceil(max_seq_len / (2 * tokens per tile))), passed to it
  through XQA_NB_SUB_SEQ so the scratch is sized for exactly that (--sub-seqs times other counts too); the kernel
  then uses min(tiles // 2, that) sub-sequences where a request has >= 4 tiles, else 1.

Before anything is timed, every peer runs a small case (B = 2, L = 1000 and 2500: partial pages and tiles) against
the fp64 oracle (relative L2 <= 1e-2 for bf16; XQA's fp8 path rounds P to e4m3, see FP8_PEER_TOL), and on every
timed shape XQA's output is compared with our first configuration's on the same inputs. Timing: CUDA-graph replay
medians over inputs rotated past L2 (kdtree_lab.checks), merge / combine included; the copy bandwidth and the mma.sync
peak measured in the same run. Writes one JSON (--out, rewritten after every shape; ``complete`` says whether it
finished) with provenance, prints a table; exits 1 with one line when a build or a check fails.

    python3 scripts/xqa_peer.py --out $OUT/xqa-peer.json [--batches 1,8] [--lengths 4096,32768,200000]
        [--impl NAME,...] [--kv bf16,fp8] [--sub-seqs auto,1,...] [--page-size 64]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # xqa_source, beside this file
import xqa_source  # noqa: E402

from kdtree_lab.checks.bench_presets import TIMEABLE  # noqa: E402
from kdtree_lab.checks.roofline import Shape  # noqa: E402
from kdtree_lab.core.mla import D_QK, D_V  # noqa: E402
from kdtree_lab.kernels.impls import IMPLS  # noqa: E402

HEADS = 128  # XQA MLA's only head count (HEAD_GRP_SIZE 128, one KV head)
DEFAULT_IMPLS = ("cuda_sm120", "cuda")  # the sm_120 kernel forced, and the configuration this GPU selects
PEER = "xqa_mla"
PEER_TOL = 1e-2  # relative L2 against the fp64 oracle, bf16 (kdtree_lab.checks.parity's bound)
# XQA's fp8 path feeds PV with P rounded to e4m3 (3 mantissa bits: rms relative error 2^-4 / sqrt(3) ~ 3.6% per
# weight, which carries into the output at about that size); a wrong page or row gives ~100%.
FP8_PEER_TOL = 8e-2
CHECK_LENS = (1000, 2500)  # the oracle case: partial last pages and tiles, two different lengths
DEFAULT_BUDGET_S = 200.0


class PeerError(RuntimeError):
    """A build, load or check failed: the message is the one line the script exits with."""


# ---- pure parts (tested on the CPU) ----------------------------------------------------------------------------

def _ints(text: str, name: str, lo: int = 1) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: expected a comma list of integers, got {text!r}") from None
    if not values or min(values) < lo:
        raise argparse.ArgumentTypeError(f"{name}: expected integers >= {lo}, got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; bad values exit 2 with one line naming the option, what it expects and what it got."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="the JSON result (rewritten after every shape)")
    ap.add_argument("--batches", default="1,8", help="B values, comma list")
    ap.add_argument("--lengths", default="4096,32768,200000", help="prefix lengths L (tokens), comma list")
    ap.add_argument("--impl", default="", help="our configurations to time besides cuda_sm120 and cuda (names of "
                                               "kdtree_lab.kernels.impls, comma list)")
    ap.add_argument("--kv", default="bf16,fp8", help="pools: bf16, fp8 (fp8 rows only where XQA's fp8 builds)")
    ap.add_argument("--sub-seqs", default="auto", help="XQA split counts per request: auto (launchMLA's rule) "
                                                       "and/or integers, comma list")
    ap.add_argument("--page-size", type=int, default=64, choices=xqa_source.PAGE_SIZES, help="XQA tokens per page")
    ap.add_argument("--timing", default="graph", choices=("graph", "eager"))
    ap.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                    help="start no new shape after this many seconds (the JSON then says complete: false)")
    ap.add_argument("--xqa-dir", type=Path, default=xqa_source.XQA_DIR, help="the extracted XQA sources")
    ap.add_argument("--build-dir", type=Path, default=xqa_source.BUILD_DIR)
    a = ap.parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        a.batches = _ints(a.batches, "--batches")
        a.lengths = _ints(a.lengths, "--lengths")
        a.sub_seqs = _sub_seqs(a.sub_seqs)
    except argparse.ArgumentTypeError as exc:
        ap.error(str(exc))
    extra = [x for x in a.impl.split(",") if x.strip()]
    bad = [x for x in extra if x not in TIMEABLE]
    if bad:
        ap.error(f"--impl: expected names from {', '.join(TIMEABLE)}, got {', '.join(bad)}")
    a.impls = list(dict.fromkeys([*DEFAULT_IMPLS, *extra]))
    a.kv = [x for x in a.kv.split(",") if x.strip()]
    if not a.kv or any(x not in xqa_source.KV_DEFINES for x in a.kv):
        ap.error(f"--kv: expected a comma list of {', '.join(xqa_source.KV_DEFINES)}, got {','.join(a.kv) or '(none)'}")
    return a


def _sub_seqs(text: str) -> list[int | str]:
    out: list[int | str] = []
    for x in (s.strip() for s in text.split(",")):
        if x == "auto":
            out.append("auto")
        elif x:
            out += _ints(x, "--sub-seqs")
    if not out:
        raise argparse.ArgumentTypeError(f"--sub-seqs: expected auto and/or integers >= 1, got {text!r}")
    return list(dict.fromkeys(out))


def peer_shape(batch: int, prefix: int, kv: str = "bf16") -> Shape:
    """The bench Shape both peers run: B requests, prefix L, N = 1 draft node (causal), 128 heads."""
    return Shape(batch, prefix, 1, HEADS, "causal", kv)


def pages_per_seq(seq_len: int, page_size: int) -> int:
    return -(-seq_len // page_size)


def xqa_sub_seqs(sms: int, batch: int, max_seq_len: int, tokens_per_tile: int) -> int:
    """The split count launchMLA gives each request (its grid's y) when XQA_NB_SUB_SEQ is unset: four clusters of
    4 CTAs per SM's worth of work, (SMs // 4) // B * 4 (integer division, as its C++ does), at least 1, at most
    one per two tiles of the longest sequence."""
    return min(max(1, (sms // 4) // batch * 4), -(-max_seq_len // (2 * tokens_per_tile)))


def xqa_sub_seqs_used(grid_sub_seqs: int, seq_len: int, tokens_per_tile: int) -> int:
    """The sub-sequences the kernel splits a request of ``seq_len`` tokens into under a grid of ``grid_sub_seqs``:
    multi-block only with >= 2 sub-sequences in the grid and >= 4 tiles, then at least two tiles each."""
    tiles = -(-seq_len // tokens_per_tile)
    return min(tiles // 2, grid_sub_seqs) if grid_sub_seqs > 1 and tiles >= 4 else 1


def rates(shape: Shape, ms: float, ceilings: dict) -> dict:
    """A row's rates from its time (ms): the shape's FLOPs (bench.Shape: 2 x (576 + 512) x B x N x H x (L + N)) and
    KV bytes (B x L x 576 x element bytes) per second, and as fractions of the mma.sync peak and the copy
    bandwidth measured in the same run."""
    t = ms * 1e-3
    tflops, gbps = shape.flops / t / 1e12, shape.kv_bytes / t / 1e9
    mma = ceilings.get("mma_sync_tflops")
    return {"TFLOP/s": round(tflops, 2), "of_mma_sync": round(tflops / mma, 4) if mma else None,
            "GB/s": round(gbps, 1), "of_copy": round(gbps / ceilings["copy_gbps"], 4)}


def make_row(peer: str, shape: Shape, ms: float, samples: int, method: str, ceilings: dict, **extra) -> dict:
    """One result row: which peer, the shape it ran (B, L, N, H, pool), its median time and rates, then extras."""
    return {"peer": peer, "B": shape.batch, "L": shape.prefix, "N": shape.draft, "H": shape.heads, "kv": shape.kv,
            "ms": round(ms, 4), **rates(shape, ms, ceilings), "timing": method, "samples": samples, **extra}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def table(result: dict) -> str:
    """The printed table: one line per row, the shape each peer ran, time and rates."""
    from kdtree_lab.core.display import markdown_table

    rows = [{"peer": r["peer"] + (f" ({r['sub_seqs']} sub-seqs)" if "sub_seqs" in r else ""),
             "kernel": r.get("kernel", ""), "kv": r["kv"], "B": r["B"], "L": r["L"], "N": r["N"], "H": r["H"],
             "ms": f"{r['ms']:.4f}", "TFLOP/s": f"{r['TFLOP/s']:.1f}", "of mma.sync": _pct(r["of_mma_sync"]),
             "GB/s": f"{r['GB/s']:.0f}", "of copy": _pct(r["of_copy"])} for r in result["rows"]]
    c = result["ceilings"]
    head = (f"ceilings: copy {c['copy_gbps']:.0f} GB/s, mma.sync {c['mma_sync_tflops']:.0f} TFLOP/s, "
            f"GEMM {c['gemm_tflops']:.0f} TFLOP/s; timing: {result['timing']}")
    return head + "\n" + markdown_table(rows)


def write_result(path: Path, result: dict) -> None:
    """Write ``result`` as JSON atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)


# ---- GPU parts --------------------------------------------------------------------------------------------------

@dataclass
class Harness:
    """A loaded harness build (ctypes) and its compile-time facts."""

    kv: str
    lib: ctypes.CDLL
    tokens_per_page: int
    tokens_per_tile: int
    elem_bytes: int
    dynamic_smem: int

    def scratch_bytes(self, batch: int, sub_seqs: int) -> int:
        return int(self.lib.xqa_peer_scratch_bytes(batch, sub_seqs))


def load_harness(path: Path, kv: str) -> Harness:
    """Load a harness library (libcuda.so.1 first, with RTLD_GLOBAL: the harness leaves its driver symbols to it)."""
    import torch

    torch.cuda.init()  # the primary context first: the harness's static initialiser attaches to it
    try:
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise PeerError(f"XQA harness {path.name} does not load: {exc}") from None
    u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    lib.xqa_peer_launch.argtypes = [ctypes.c_float, vp, vp, vp, vp, u32, vp, u32, ctypes.c_float, vp, vp,
                                    ctypes.c_int, u64, u64, u64, vp]
    lib.xqa_peer_launch.restype = ctypes.c_int
    lib.xqa_peer_scratch_bytes.argtypes = [u32, u32]
    lib.xqa_peer_scratch_bytes.restype = u64
    lib.xqa_peer_last_error.restype = ctypes.c_char_p
    facts = ("tokens_per_page", "tokens_per_tile", "cache_elem_bytes", "head_group", "head_elems", "dynamic_smem")
    for name in facts:
        getattr(lib, f"xqa_peer_{name}").restype = u32
    got = {name: int(getattr(lib, f"xqa_peer_{name}")()) for name in facts}
    want_bytes = 2 if kv == "bf16" else 1
    if got["head_group"] != HEADS or got["head_elems"] != D_QK or got["cache_elem_bytes"] != want_bytes:
        raise PeerError(f"XQA harness {path.name}: heads {got['head_group']}, head dim {got['head_elems']}, "
                        f"{got['cache_elem_bytes']}-byte elements; expected {HEADS}, {D_QK}, {want_bytes} ({kv})")
    return Harness(kv, lib, got["tokens_per_page"], got["tokens_per_tile"], got["cache_elem_bytes"],
                   got["dynamic_smem"])


@dataclass
class PeerInputs:
    """XQA's buffers for one verify batch: the paged cache of the batch's own latent rows, Q, and the outputs."""

    q: object  # [B, 128, 576] in the cache's element type
    cache: object  # [pages, page_size, 576]
    page_list: object  # int32 [B, pages per request]
    seq_lens: object  # int32 (read as uint32) [B]: L + 1 per request
    out: object  # bf16 [B, 128, 512]
    max_seq_len: int
    q_scale: float
    kv_scale: float


def paged_inputs(batch, page_size: int, seed: int = 0) -> PeerInputs:
    """XQA's inputs for a VerifyBatch with N = 1: request b's L prefix rows (k_buffer at its kv_indices) then its
    k_extend row, written token by token into pages of ``page_size`` tokens; the pages of all requests in a
    shuffled order (a seeded permutation), unused slots of a last page zero."""
    import torch

    if batch.max_extend_len != 1 or batch.num_heads != HEADS:
        raise ValueError(f"batch: XQA MLA runs N = 1 x H = {HEADS}; got N = {batch.max_extend_len}, "
                         f"H = {batch.num_heads}")
    dev, dtype = batch.q.device, batch.k_buffer.dtype
    kv_indptr = batch.kv_indptr.tolist()
    seq = [kv_indptr[b + 1] - kv_indptr[b] + 1 for b in range(batch.bs)]
    pps = pages_per_seq(max(seq), page_size)
    gen = torch.Generator().manual_seed(seed)
    page_list = torch.randperm(batch.bs * pps, generator=gen).view(batch.bs, pps).to(dev, torch.int32)
    width = D_QK * batch.k_buffer.element_size()  # rows are moved as bytes: fp8 has no index_put / cat
    cache = torch.zeros(batch.bs * pps * page_size, width, dtype=torch.uint8, device=dev)
    pool = batch.k_buffer.view(torch.uint8)[:, 0, :]
    own = batch.k_extend[:, 0, :].to(dtype).contiguous().view(torch.uint8)  # the draft token's row, N = 1
    for b in range(batch.bs):
        rows = torch.cat([pool[batch.kv_indices[kv_indptr[b]:kv_indptr[b + 1]]], own[b:b + 1]])
        t = torch.arange(seq[b], device=dev)
        cache[page_list[b, t // page_size].long() * page_size + t % page_size] = rows
    return PeerInputs(q=batch.q.to(dtype).contiguous(), cache=cache.view(dtype).view(-1, page_size, D_QK),
                      page_list=page_list,
                      seq_lens=torch.tensor(seq, dtype=torch.int32, device=dev),
                      out=torch.full((batch.bs, HEADS, D_V), float("nan"), dtype=torch.bfloat16, device=dev),
                      max_seq_len=pps * page_size, q_scale=batch.sm_scale, kv_scale=batch.k_scale)


class XqaCall:
    """One XQA launch configuration: the harness, a split count and its scratch; ``__call__(inputs)`` launches
    on torch's current stream (capture-safe: no allocation, no sync)."""

    def __init__(self, harness: Harness, batch: int, sub_seqs: int):
        import torch

        self.h, self.sub_seqs = harness, sub_seqs
        self.scratch = torch.zeros(harness.scratch_bytes(batch, sub_seqs), dtype=torch.uint8, device="cuda")
        self.semaphores = torch.zeros(batch, dtype=torch.int32, device="cuda")  # the kernel returns them to 0

    def __call__(self, x: PeerInputs) -> None:
        import torch

        page = x.cache.shape[1]
        os.environ["XQA_NB_SUB_SEQ"] = str(self.sub_seqs)  # launchMLA reads it on every call
        status = self.h.lib.xqa_peer_launch(
            x.q_scale, x.out.data_ptr(), x.q.data_ptr(), x.cache.data_ptr(), x.page_list.data_ptr(), x.max_seq_len,
            x.seq_lens.data_ptr(), x.q.shape[0], x.kv_scale, self.semaphores.data_ptr(), self.scratch.data_ptr(),
            0, page * D_QK, D_QK, D_QK, torch.cuda.current_stream().cuda_stream)
        if status != 0:
            raise PeerError(f"XQA launchMLA: {self.h.lib.xqa_peer_last_error().decode()}")


def _sms() -> int:
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count


def auto_sub_seqs(harness: Harness, batch: int, max_seq_len: int) -> int:
    return xqa_sub_seqs(_sms(), batch, max_seq_len, harness.tokens_per_tile)


def run_ours(impl: str, batch) -> tuple[object, int, int]:
    """One call of our configuration ``impl`` on ``batch`` at its plan's split count: (output, status flags,
    split count)."""
    from kdtree_lab.core.dtypes import kv_dtype_of
    from kdtree_lab.kernels.attention import VerifyAttention, batch_args

    attn = VerifyAttention(batch.bs, batch.max_extend_len, batch.num_heads, kv_dtype_of(batch.k_buffer.dtype).name,
                           batch.q.device, impl, batch_sizes=(batch.bs,))
    attn.run(*batch_args(batch))
    return batch.o, attn.status(), attn.nsplit(batch.bs)


def _err(out, ref) -> dict:
    from kdtree_lab.checks.oracle import compare

    e = compare(out, ref)
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in e.items()}


def check(harnesses: dict[str, Harness], impls: list[str], page_size: int) -> list[dict]:
    """Every peer on the small case against the fp64 oracle (XQA at its own split count and at 1); raises
    PeerError naming the first that misses its tolerance."""
    import torch
    from kdtree_lab.checks.batch import build_verify_batch
    from kdtree_lab.checks.oracle import reference

    out = []
    for kv in sorted({*harnesses, "bf16"}):
        batch = build_verify_batch(list(CHECK_LENS), 1, HEADS, mask="causal", seed=11, device="cuda", kv_dtype=kv)
        if kv == "fp8":  # XQA's fp8 Q and draft row are e4m3: give the oracle those values (k_scale = v_scale = 1)
            batch.q.copy_(batch.q.to(torch.float8_e4m3fn).to(torch.bfloat16))
            batch.k_extend.copy_(batch.k_extend.to(torch.float8_e4m3fn).to(torch.bfloat16))
            batch.v_extend.copy_(batch.k_extend[..., :D_V])
        ref = reference(batch)
        case = {"B": batch.bs, "L": list(CHECK_LENS), "N": 1, "H": HEADS, "kv": kv}
        if kv in harnesses:
            x = paged_inputs(batch, page_size)
            for sub in (auto_sub_seqs(harnesses[kv], batch.bs, x.max_seq_len), 1):
                x.out.fill_(float("nan"))
                XqaCall(harnesses[kv], batch.bs, sub)(x)
                torch.cuda.synchronize()
                out.append(_verdict({"peer": PEER, **case, "sub_seqs": sub, **_err(x.out, ref)},
                                    PEER_TOL if kv == "bf16" else FP8_PEER_TOL))
        for impl in impls:
            if kv not in IMPLS[impl].kv_dtypes:
                continue
            got, flags, ns = run_ours(impl, batch)
            out.append(_verdict({"peer": impl, **case, "nsplit": ns, "status_flags": flags, **_err(got, ref)},
                                PEER_TOL))
    bad = next((r for r in out if not r["ok"]), None)
    if bad:
        raise PeerError(f"check failed: {bad['peer']} ({bad['kv']}, B={bad['B']}, L={bad['L']}, N=1, H={HEADS}"
                        f"{', sub-seqs ' + str(bad['sub_seqs']) if 'sub_seqs' in bad else ''}): rel_l2 "
                        f"{bad['rel_l2']:.3g} (tolerance {bad['tolerance']}), {bad['nan']} NaN, status flags "
                        f"{bad.get('status_flags', 0)}")
    return out


def _verdict(r: dict, tol: float) -> dict:
    r["tolerance"] = tol
    r["ok"] = r["nan"] == 0 and r["rel_l2"] <= tol and r.get("status_flags", 0) == 0
    return r


def time_peer(call: XqaCall, inputs: list[PeerInputs], method: str) -> tuple[float, int, str]:
    from kdtree_lab.checks.timing import timed

    return timed(lambda i: call(inputs[i]), len(inputs), method)


def cross_check(x: PeerInputs, call: XqaCall, batch, impl: str, kv: str) -> dict:
    """XQA's output against ``impl``'s on the same timed inputs (copy 0): relative L2 between the two."""
    import torch

    if batch.k_scale != batch.v_scale:  # XQA has one scale for K and V: not the same function
        return {"against": impl, "skipped": f"XQA has one KV scale; this pool has k_scale {batch.k_scale}, "
                                            f"v_scale {batch.v_scale}"}
    x.out.fill_(float("nan"))
    call(x)
    got, _, _ = run_ours(impl, batch)
    torch.cuda.synchronize()
    e = _err(x.out, got)
    tol = PEER_TOL if kv == "bf16" else FP8_PEER_TOL
    return {"against": impl, "rel_l2": e["rel_l2"], "nan": e["nan"], "tolerance": tol,
            "ok": e["nan"] == 0 and e["rel_l2"] <= tol}


def build_all(kvs: list[str], arch: str, page_size: int, src: Path, out_dir: Path) -> dict:
    """Build the harness for every pool at once (nvcc in parallel); kv -> xqa_source.XqaBuild."""
    from kdtree_lab.core.cuda_tools import find_nvcc

    nvcc = find_nvcc()
    if not nvcc:
        raise PeerError("nvcc not found: set CUDA_HOME or put nvcc on PATH")
    xqa_source.check_sources(src)
    with ThreadPoolExecutor(len(kvs)) as pool:
        futures = {kv: pool.submit(xqa_source.build, kv, arch, page_size, src, out_dir, nvcc) for kv in kvs}
        return {kv: f.result() for kv, f in futures.items()}


class Interrupted(Exception):
    pass


def _on_term(signum, frame):  # timeout(1) sends SIGTERM: stop, and say so in the JSON
    raise Interrupted(f"signal {signal.Signals(signum).name}")


def run(a: argparse.Namespace) -> dict:
    import torch
    from kdtree_lab.checks.timing import measure_ceilings
    from kdtree_lab.kernels import loader
    from kdtree_lab.lab.provenance import provenance

    t_start = time.monotonic()
    if not torch.cuda.is_available():
        raise PeerError("no CUDA GPU: the peer benchmark runs on a GPU machine (carry .xqa there)")
    arch = loader.gpu_arch()
    try:
        manifest = xqa_source.check_sources(a.xqa_dir)
    except xqa_source.SourceError as exc:
        raise PeerError(str(exc)) from None
    kvs = sorted(set(a.kv) | {"bf16"})  # the bf16 build is always needed (the check; the peer of record)
    builds = build_all(kvs, arch, a.page_size, a.xqa_dir, a.build_dir)
    if builds["bf16"].library is None:
        raise PeerError(f"XQA MLA bf16 does not build for {arch}: {builds['bf16'].error}")
    harnesses = {kv: load_harness(b.library, kv) for kv, b in builds.items() if b.library is not None}
    skipped = {kv: f"XQA MLA {kv} does not build for {arch}: {builds[kv].error}" for kv in a.kv if kv not in harnesses}
    shapes = [peer_shape(b, n, kv) for kv in a.kv if kv in harnesses for b in a.batches for n in a.lengths]
    if not shapes:
        raise PeerError(f"nothing to time: {'; '.join(skipped.values())}")
    result = {
        "what": "XQA MLA (FlashInfer's sm_120 MLA decode kernel) beside our configurations on the same rows",
        "provenance": provenance(" ".join(["python3", "scripts/xqa_peer.py", *a.argv])),
        "xqa": {"package": manifest["package"], "version": manifest["version"], "wheel": manifest["wheel"],
                "wheel_sha256": manifest["wheel_sha256"], "sources_sha256": manifest["sources_sha256"],
                "arch": arch, "page_size": a.page_size, "builds": {kv: b.summary() for kv, b in builds.items()},
                "tokens_per_tile": {kv: h.tokens_per_tile for kv, h in harnesses.items()},
                "dynamic_smem_bytes": {kv: h.dynamic_smem for kv, h in harnesses.items()},
                "sub_seqs_rule": "min(max(1, (SMs // 4) // B * 4), ceil(max_seq_len / (2 * tokens_per_tile)))",
                "pdl": False},  # mla_sm120.cu has no griddepcontrol.wait: PDL could start it before its inputs exist
        "shapes": {"ours": "B requests x N = 1 draft node x H = 128 heads (128 rows each) over prefix L plus the "
                           "node itself (custom_mask None: causal), SGLang's page-size-1 pool (bench.shape_batches)",
                   PEER: f"one query token x 128 heads per request over a paged cache of the same L + 1 latent "
                         f"rows, {a.page_size} tokens per page, pages shuffled; K and V the same rows"},
        "sms": _sms(), "ceilings": None, "check": None, "timing": a.timing,
        "grid": {"batches": a.batches, "lengths": a.lengths, "kv": a.kv, "impls": a.impls, "sub_seqs": a.sub_seqs},
        "skipped": skipped,
        "rows": [], "cross_check": [], "complete": False,
    }
    write_result(a.out, result)
    result["check"] = check(harnesses, a.impls, a.page_size)
    result["ceilings"] = asdict(measure_ceilings())
    write_result(a.out, result)
    for i, shape in enumerate(shapes):
        if time.monotonic() - t_start > a.budget_s:
            result["stopped"] = f"time budget of {a.budget_s:.0f} s reached after {i} of {len(shapes)} shapes"
            break
        time_shape(shape, a, harnesses[shape.kv], result)
        torch.cuda.empty_cache()
        write_result(a.out, result)
    else:
        result["complete"] = True
    result["seconds"] = round(time.monotonic() - t_start, 1)
    write_result(a.out, result)
    return result


def time_shape(shape: Shape, a: argparse.Namespace, harness: Harness, result: dict) -> None:
    """XQA at each split count, then our configurations, on ``shape``; rows and the cross-check into ``result``."""
    from kdtree_lab.checks.bench import shape_batches, time_ours

    batches = shape_batches(shape)  # the rows time_ours builds again from the same seeds
    inputs = [paged_inputs(b, a.page_size, seed=i) for i, b in enumerate(batches)]
    c = result["ceilings"]
    for sub in a.sub_seqs:
        n = auto_sub_seqs(harness, shape.batch, inputs[0].max_seq_len) if sub == "auto" else sub
        call = XqaCall(harness, shape.batch, n)
        ms, samples, how = time_peer(call, inputs, a.timing)
        result["rows"].append(make_row(
            PEER, shape, ms, samples, how, c, kernel="kernel_mha (mla_sm120.cu)", sub_seqs=n,
            sub_seqs_rule=sub == "auto", sub_seqs_used=xqa_sub_seqs_used(n, shape.prefix + 1, harness.tokens_per_tile),
            page_size=a.page_size, seq_len=shape.prefix + 1))
        if sub == a.sub_seqs[0]:
            cc = cross_check(inputs[0], call, batches[0], a.impls[0], shape.kv)
            result["cross_check"].append({"B": shape.batch, "L": shape.prefix, "kv": shape.kv, "sub_seqs": n, **cc})
            if cc.get("ok") is False:
                raise PeerError(f"cross-check failed: XQA MLA vs {a.impls[0]} ({shape.kv}, B={shape.batch}, "
                                f"L={shape.prefix}): rel_l2 {cc['rel_l2']:.3g} > {cc['tolerance']}, {cc['nan']} NaN")
        del call
    del batches, inputs
    for impl in a.impls:
        if shape.kv not in IMPLS[impl].kv_dtypes:
            continue
        t = time_ours(impl, shape, method=a.timing)
        result["rows"].append(make_row(impl, shape, t.ms, t.ms_samples, t.method, c, kernel=t.kernel,
                                       nsplit=t.nsplit, mask="causal"))
    print(f"B={shape.batch} L={shape.prefix} {shape.kv}: " + ", ".join(
        f"{r['peer']} {r['ms']:.4f} ms" for r in result["rows"] if (r["B"], r["L"], r["kv"]) ==
        (shape.batch, shape.prefix, shape.kv)), flush=True)


def _mark_stopped(out: Path, why: str) -> None:
    """Say in the JSON already written (if any) that the run stopped, and why."""
    if out.exists():
        partial = json.loads(out.read_text())
        partial["complete"], partial["stopped"] = False, why
        write_result(out, partial)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    try:
        result = run(a)
    except (PeerError, Interrupted, KeyboardInterrupt) as exc:
        why = str(exc) or type(exc).__name__
        _mark_stopped(a.out, why)
        print(f"xqa_peer: {why}", file=sys.stderr)
        return 1
    except Exception as exc:  # unforeseen: the file says how the run ended, the traceback says where
        _mark_stopped(a.out, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        raise
    print(table(result))
    if not result["complete"]:
        print(f"xqa_peer: incomplete: {result.get('stopped')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
