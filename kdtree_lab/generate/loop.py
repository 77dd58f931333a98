"""The speculative decoding loop over the paged latent pool, as SGLang's EAGLE worker runs it (page size 1, greedy).

A step, per batch of requests:

1. draft: one tree per request from the draft model (``drafts.Drafter``), rooted at the request's last committed
   token, which has no KV yet;
2. verify: the target's forward over the B x N tree nodes at positions (context length + depth), one pool slot
   allocated per node and written in every layer, the attention a verify path (``attend.Paths``) called with SGLang's
   buffers: ``qo_indptr``, ``kv_indptr`` / ``kv_indices`` over the committed slots, the full tree mask (per request
   N x (L + N), the prefix columns set) at ``mask_indptr``; eager, or replayed from a CUDA graph captured once at an
   SGLang capture size with the step's metadata copied into its static buffers;
3. accept: greedy, the longest path from the root whose every token is the target's argmax after its parent, plus
   the target's token after the last one (the bonus); the root's and the path's slots join the request's committed
   slots, the other nodes' slots are freed; the bonus is the next root.

``greedy`` is the same model decoding one token per step without speculation (SGLang's decode kernel on a GPU, the
fp32 reference on a CPU): the tokens and the speed speculation is measured against.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..contract.spec import sglang_capture_sizes
from ..checks.bench import sglang_available
from ..core.mla import D_V
from ..core.tree import DraftTree, chain
from .attend import CAPTURE_SAFE, DraftDecode, Paths, VerifyCall, reference_attention
from .drafts import DraftConfig, Drafter
from .forward import forward
from .model import Weights
from .pool import LatentPool


class GenerationInputError(ValueError):
    """A request the loop cannot serve as asked (a prompt longer than the pool, a draft larger than planned)."""


@dataclass
class Request:
    """One request's state: its prompt, its committed slots (``ctx`` on the device through ``Engine.req_to_token``,
    ``length`` of them), the pending root token and what it emitted."""

    prompt: list[int]
    length: int = 0
    pending: int = -1
    emitted: list[int] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)  # per emitted token: the row of logits that chose it
    accepts: list[int] = field(default_factory=list)  # per step: tokens emitted (accepted drafts + 1)


@dataclass
class StepTimes:
    draft_ms: float
    verify_ms: float
    step_ms: float


class Engine:
    """The weights, the pool, the requests and the verify machinery of one run. State: the pool's contents and the
    requests' progress, the captured graph and its static buffers."""

    def __init__(self, w: Weights, prompts: list[list[int]], max_new: int, kv_dtype: str, device: torch.device,
                 num_draft: int = 1, forwards: int = 0, draft_kind: str | None = None, impl: str = "cuda",
                 prefill_chunk: int = 4096):
        self.w, self.device, self.max_new = w, device, max_new
        b = len(prompts)
        if b < 1:
            raise GenerationInputError("prompts: expected at least one prompt")
        self.num_draft = num_draft
        longest = max(len(p) for p in prompts)
        self.max_len = longest + max_new + 2 * num_draft + 2
        slots = b * self.max_len + b * max(num_draft, 1) * (max(forwards, 1) + 2) + 8
        self.pool = LatentPool(len(w.layers), slots, kv_dtype, device)
        self.requests = [Request(list(p)) for p in prompts]
        self.req_to_token = torch.zeros(b, self.max_len, dtype=torch.int64, device=device)
        kind = draft_kind or ("sglang" if device.type == "cuda" and sglang_available() else "reference")
        rows = b * max(num_draft, 1)
        self.draft_decode = DraftDecode(kind, w.spec.heads, max(rows, b), device)
        self.paths = Paths(w.spec.heads, kv_dtype, _capture_size(b), device, impl)
        self.prefill_chunk = prefill_chunk
        self._graph: dict[int, object] = {}  # per padded batch size
        self._static: dict[int, dict[str, torch.Tensor]] = {}

    # -- prefill -------------------------------------------------------------------------------------------------
    def prefill(self) -> None:
        """Every prompt's KV into the pool (chunks of ``prefill_chunk`` tokens, causal, in the weights' dtype); the
        first token each request emits is the argmax at its prompt's last position."""
        for b, req in enumerate(self.requests):
            n = len(req.prompt)
            slots = torch.tensor(self.pool.alloc(n), dtype=torch.int64, device=self.device)
            self.req_to_token[b, :n] = slots
            ids = torch.tensor(req.prompt, dtype=torch.int64, device=self.device)
            last = None
            for s0 in range(0, n, self.prefill_chunk):
                s1 = min(n, s0 + self.prefill_chunk)
                chunk = slots[s0:s1]
                ctx = slots[:s0]

                def attention(i, q, k, ctx=ctx):
                    return reference_attention(q, self.pool.buffers[i], [ctx], k, k[:, :D_V], [(0, q.shape[0])],
                                               [None], self.w.sm_scale, dtype=self.w.dtype)

                last = forward(self.w, ids[s0:s1], torch.arange(s0, s1, device=self.device), attention,
                               write=lambda i, k, chunk=chunk: self.pool.write(i, chunk, k))
            req.length = n
            row = last[-1]
            req.pending = int(row.argmax())
            req.emitted.append(req.pending)
            req.logits.append(row.cpu().numpy())
            req.accepts.append(1)

    # -- plain greedy decoding -----------------------------------------------------------------------------------
    def greedy_step(self) -> StepTimes:
        """One token per request without speculation: the pending tokens' forward, each over its committed slots and
        its own row (the draft decode's kernel in every layer)."""
        t0 = time.perf_counter()
        active = self.active()
        reqs = [self.requests[i] for i in active]
        own = self.pool.alloc(len(reqs))
        own_t = torch.tensor(own, dtype=torch.int64, device=self.device)
        kv_indices = torch.cat([torch.cat([self.req_to_token[i, :r.length], own_t[j:j + 1]])
                                for j, (i, r) in enumerate(zip(active, reqs))])
        ptr = np.cumsum([0] + [r.length + 1 for r in reqs])
        kv_indptr = torch.tensor(ptr, dtype=torch.int32, device=self.device)
        ids = torch.tensor([r.pending for r in reqs], dtype=torch.int64, device=self.device)
        pos = torch.tensor([r.length for r in reqs], dtype=torch.int64, device=self.device)

        def attention(i, q, k):
            return self.draft_decode(q, self.pool.buffers[i], kv_indptr, kv_indices, self.w.sm_scale)

        logits = forward(self.w, ids, pos, attention, write=lambda i, k: self.pool.write(i, own_t, k))
        nxt = logits.argmax(-1).tolist()
        rows = logits.cpu().numpy()
        for j, (i, r) in enumerate(zip(active, reqs)):
            self.req_to_token[i, r.length] = own[j]
            r.length += 1
            r.pending = nxt[j]
            r.emitted.append(nxt[j])
            r.logits.append(rows[j])
            r.accepts.append(1)
        ms = (time.perf_counter() - t0) * 1e3
        return StepTimes(0.0, ms, ms)

    # -- speculative decoding ------------------------------------------------------------------------------------
    def _buffers(self, bs_pad: int) -> dict[str, torch.Tensor]:
        """The verify's static buffers for ``bs_pad`` requests (SGLang's capture layout: kv_indices and the mask
        sized for the longest context, qo_indptr int64)."""
        if bs_pad in self._static:
            return self._static[bs_pad]
        n, dev = self.num_draft, self.device
        rows = bs_pad * n
        self._static[bs_pad] = {
            "ids": torch.zeros(rows, dtype=torch.int64, device=dev),
            "pos": torch.zeros(rows, dtype=torch.int64, device=dev),
            "out_loc": torch.zeros(rows, dtype=torch.int64, device=dev),
            "qo_indptr": torch.arange(0, (bs_pad + 1) * n, n, dtype=torch.int64, device=dev),
            "kv_indptr": torch.zeros(bs_pad + 1, dtype=torch.int32, device=dev),
            "kv_indices": torch.zeros(bs_pad * self.max_len, dtype=torch.int64, device=dev),
            "mask": torch.zeros(bs_pad * n * (self.max_len + n), dtype=torch.uint8, device=dev),
            "mask_indptr": torch.zeros(bs_pad + 1, dtype=torch.int64, device=dev),
            "o": torch.empty(rows, self.w.spec.heads, D_V, dtype=torch.bfloat16, device=dev),
            "logits": torch.empty(rows, 256, dtype=torch.float32, device=dev),
        }
        return self._static[bs_pad]

    def _fill(self, active: list[int], trees: list[DraftTree], out_loc: list[int], bs_pad: int) -> None:
        """Copy one step's metadata for the ``active`` requests into the static buffers (padded requests: context
        1 at slot 0, a chain)."""
        s, n, dev = self._buffers(bs_pad), self.num_draft, self.device
        live = [self.requests[i] for i in active]
        lens = [r.length for r in live] + [1] * (bs_pad - len(live))
        kv_ptr = np.cumsum([0] + lens)
        s["kv_indptr"].copy_(torch.tensor(kv_ptr, dtype=torch.int32))
        for j, (i, r) in enumerate(zip(active, live)):
            s["kv_indices"][kv_ptr[j]:kv_ptr[j + 1]].copy_(self.req_to_token[i, :r.length])
        if bs_pad > len(live):
            s["kv_indices"][kv_ptr[len(live)]:kv_ptr[-1]].zero_()
        sizes = [n * (length + n) for length in lens]
        mptr = np.cumsum([0] + sizes)
        s["mask_indptr"].copy_(torch.tensor(mptr, dtype=torch.int64))
        s["mask"][: mptr[-1]].fill_(1)
        idx, val = [], []
        all_trees = list(trees) + [chain(n)] * (bs_pad - len(trees))
        depth_rows, tok_rows = [], []
        for b, (length, tree) in enumerate(zip(lens, all_trees)):
            anc = tree.ancestor_mask()
            ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            idx.append(mptr[b] + ii * (length + n) + length + jj)
            val.append(anc)
            depth_rows.append(length + tree.depths)
            tok_rows.append(np.where(tree.tokens < 0, 0, tree.tokens))
        s["mask"][torch.from_numpy(np.concatenate(idx).reshape(-1)).to(dev)] = \
            torch.from_numpy(np.concatenate(val).reshape(-1).astype(np.uint8)).to(dev)
        s["ids"].copy_(torch.from_numpy(np.concatenate(tok_rows)))
        s["pos"].copy_(torch.from_numpy(np.concatenate(depth_rows)))
        s["out_loc"].copy_(torch.tensor(out_loc + [0] * (bs_pad * n - len(out_loc)), dtype=torch.int64))

    def _verify_forward(self, path, bs_pad: int) -> None:
        s, n = self._static[bs_pad], self.num_draft

        def attention(i, q, k):
            call = VerifyCall(q, k[:, None, :], k[:, None, :D_V], s["o"], self.pool.buffers[i], s["qo_indptr"],
                              s["kv_indptr"], s["kv_indices"], s["mask"], s["mask_indptr"], n, self.w.sm_scale)
            return path(call)

        s["logits"].copy_(forward(self.w, s["ids"], s["pos"], attention,
                                  write=lambda i, k: self.pool.write(i, s["out_loc"], k)))

    def spec_step(self, drafter: Drafter, path_name: str, graphs: bool) -> StepTimes:
        """One speculative step for every request (see the module docstring); returns its times."""
        t0 = time.perf_counter()
        active = self.active()
        reqs = [self.requests[i] for i in active]
        roots = [r.pending for r in reqs]
        ctx = [self.req_to_token[i, :r.length] for i, r in zip(active, reqs)]
        trees = drafter.draft(roots, ctx)
        if any(t.size != self.num_draft for t in trees):
            raise GenerationInputError(f"draft: trees of {[t.size for t in trees]} nodes, planned N={self.num_draft}")
        t1 = time.perf_counter()
        b, n = len(reqs), self.num_draft
        bs_pad = _capture_size(b) if graphs else b
        out_loc = self.pool.alloc(b * n)
        self._fill(active, trees, out_loc, bs_pad)
        path = self.paths.get(path_name, n)
        cuda = self.device.type == "cuda"
        if cuda:
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev0.record()
        if graphs:
            if path_name not in CAPTURE_SAFE or not cuda:
                raise GenerationInputError(f"graphs: the {path_name} path cannot be captured here (capture-safe on a "
                                           f"GPU: {', '.join(CAPTURE_SAFE)})")
            if bs_pad not in self._graph:
                self._graph[bs_pad] = _capture(lambda: self._verify_forward(path, bs_pad), self.device)
            self._graph[bs_pad].replay()
        else:
            self._verify_forward(path, bs_pad)
        if cuda:
            ev1.record()
        logits = self._static[bs_pad]["logits"][: b * n]
        target = logits.argmax(-1).view(b, n).cpu().numpy()
        t2 = time.perf_counter()
        keep_rows: list[tuple[int, list[int], list[int]]] = []
        for i, (r, tree) in enumerate(zip(reqs, trees)):
            path_nodes = accept(tree, target[i])
            rows = [0] + path_nodes
            emitted = [int(tree.tokens[p]) for p in path_nodes] + [int(target[i][rows[-1]])]
            keep_rows.append((i, rows, emitted))
        picked = logits.view(b, n, -1)
        freed: list[int] = []
        for i, rows, emitted in keep_rows:
            r = reqs[i]
            slots = [out_loc[i * n + j] for j in rows]
            self.req_to_token[active[i], r.length:r.length + len(slots)] = torch.tensor(slots, dtype=torch.int64,
                                                                                      device=self.device)
            freed += [out_loc[i * n + j] for j in range(n) if j not in rows]
            r.length += len(slots)
            r.pending = emitted[-1]
            r.emitted += emitted
            r.logits += list(picked[i, rows].cpu().numpy())
            r.accepts.append(len(emitted))
        self.pool.free(freed)
        verify_ms = ev0.elapsed_time(ev1) if cuda else (t2 - t1) * 1e3
        return StepTimes((t1 - t0) * 1e3, verify_ms, (time.perf_counter() - t0) * 1e3)

    def save(self):
        """The state after prefill (the free list, the requests, their slots), for ``restore``: the pool's rows need
        no copy, since a slot handed out again is written before it is read."""
        return list(self.pool._free), copy.deepcopy(self.requests), self.req_to_token.clone()

    def restore(self, saved, num_draft: int) -> None:
        """Back to ``saved`` (``save``), planned for trees of ``num_draft`` nodes (the graph is captured anew)."""
        free, requests, r2t = saved
        self.pool._free = list(free)
        self.pool._is_free = set(free)
        self.paths.clear_status()
        self.requests = copy.deepcopy(requests)
        self.req_to_token.copy_(r2t)
        self.num_draft = num_draft
        self._graph, self._static = {}, {}

    def warm(self, path_name: str, graphs: bool) -> None:
        """What a server does at start-up, before any timed step: for every batch size the run can reach (1 to the
        requests), one verify of dummy chains (their slots allocated, then freed), captured in a CUDA graph with
        ``graphs`` (as SGLang captures its sizes), else run once eager (Triton's compilation for the shape)."""
        path = self.paths.get(path_name, self.num_draft)
        active = self.active()
        for b in range(1, len(active) + 1):
            bs_pad = _capture_size(b) if graphs else b
            slots = self.pool.alloc(b * self.num_draft)
            self._fill(active[:b], [chain(self.num_draft)] * b, slots, bs_pad)
            if graphs and bs_pad not in self._graph:
                self._graph[bs_pad] = _capture(lambda bs_pad=bs_pad: self._verify_forward(path, bs_pad), self.device)
            elif not graphs:
                self._verify_forward(path, bs_pad)
            self.pool.free(slots)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def active(self) -> list[int]:
        """The requests still decoding (fewer than ``max_new`` tokens emitted): a finished one leaves the batch, and
        the next step runs (and replays the graph of) the smaller size."""
        return [i for i, r in enumerate(self.requests) if len(r.emitted) < self.max_new]

    def done(self) -> bool:
        return all(len(r.emitted) >= self.max_new for r in self.requests)


def accept(tree: DraftTree, target: np.ndarray) -> list[int]:
    """Greedy acceptance: the nodes of the longest path from the root along which each node's token is the target's
    argmax at its parent (``target[i]``: the target's token after node i). Returns the path's nodes, root excluded."""
    children: dict[int, list[int]] = {}
    for i, p in enumerate(tree.parents[1:], 1):
        children.setdefault(int(p), []).append(i)
    path, node = [], 0
    while True:
        nxt = [c for c in children.get(node, []) if int(tree.tokens[c]) == int(target[node])]
        if not nxt:
            return path
        node = nxt[0]
        path.append(node)


def _capture_size(b: int) -> int:
    """The smallest of SGLang's capture sizes that holds ``b`` requests."""
    return min(s for s in sglang_capture_sizes(max(b, 1)) if s >= b)


def _capture(fn, device: torch.device):
    """``fn`` captured in a CUDA graph after two warm-up runs on a side stream."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph
