"""The hand-offs of the sm_120 third form (kernels/mma_sync/verify_sm120_halves.cuh), modelled and run under random
interleavings on the CPU: no deadlock, no buffer overwritten before it is read, no stale read, no mbarrier wait
that its parity could fool.

The model mirrors the kernel's protocol, not its arithmetic: per CTA of the 2-CTA cluster, one PV process (the PV
group acts as one behind its named barrier) and four QK warps; the mbarriers FULL[3] (a ring slot's tile), P_FULL[2]
(4 QK warps arrive), P_EMPTY[2], X_FULL[2][4] (the local expect_tx arrival plus the partner's st.async bytes),
STATS; the pair barrier of partner warps q, q ^ 1; the same program order and parities as the kernel. A change to
the kernel's hand-offs is a change here, and the mutants below show the model fails on the bugs it is for.
"""

from __future__ import annotations

import random

import pytest

SLOTS = 3
X_BYTES = 32 * 64  # one QK warp's partial m-tile: 32 lanes x 16 floats


class Fooled(AssertionError):
    """A wait whose parity would pass on the wrong phase, or a buffer read or written out of turn."""


class MBar:
    def __init__(self, count: int):
        self.count, self.pending, self.tx, self.done = count, count, 0, 0  # done: completed phases

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.done, self.pending = self.done + 1, self.count

    def arrive(self, expect_tx: int = 0):
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, nbytes: int):
        self.tx -= nbytes
        self._maybe_complete()


def wait(bar: MBar, phase: int):
    """Wait for completed phase `phase` as try_wait.parity(phase & 1) does: it passes once the current phase's
    parity differs, which is right only while at most the phase before `phase` is still current."""
    while True:
        if bar.done not in (phase, phase + 1):
            raise Fooled(f"waiting for phase {phase}, {bar.done} phases completed: the parity is ambiguous")
        if bar.done == phase + 1:
            return
        yield


class PairBarrier:
    def __init__(self):
        self.arrived, self.generation = 0, 0

    def sync(self):
        gen = self.generation
        self.arrived += 1
        if self.arrived == 2:
            self.arrived, self.generation = 0, gen + 1
            return
        while self.generation == gen:
            yield


def simulate(ntiles: int, draft: bool, seed: int, xs_buffers: int = 2, pipelined_draft: bool = False) -> None:
    """One launch of a 2-CTA cluster over `ntiles` tiles under a random schedule; raises Fooled or RuntimeError."""
    rng = random.Random(seed)
    depth = 1 if draft else SLOTS
    kslot = (lambda t: 0) if draft else (lambda t: t % SLOTS)
    ctas = []
    for _ in range(2):
        ctas.append(dict(full=[MBar(1) for _ in range(SLOTS)], p_full=[MBar(4) for _ in range(2)],
                         p_empty=[MBar(1) for _ in range(2)], x_full=[[MBar(1) for _ in range(4)] for _ in range(2)],
                         stats=MBar(4), slot=[None] * SLOTS, reading=[None] * 4, xs=[[None] * 4 for _ in range(2)],
                         xs_read=[[True] * 4 for _ in range(2)], sx=[[None] * 4 for _ in range(2)],
                         pb=[None, None], pair=[PairBarrier(), PairBarrier()]))

    def pv(r):
        c = ctas[r]

        def load(t):
            if any(x is not None and x <= t - depth for x in c["reading"]):
                raise Fooled(f"CTA {r}: slot of tile {t - depth} refilled while a QK warp reads it")
            c["slot"][kslot(t)] = t
            c["full"][kslot(t)].arrive()

        for t in range(min(depth, ntiles)):
            load(t)
        for t in range(ntiles):
            b = t & 1
            yield from wait(c["p_full"][b], t >> 1)
            if c["pb"][b] != (t, 4):
                raise Fooled(f"CTA {r}: P buffer {b} holds {c['pb'][b]} for tile {t}")
            yield from wait(c["full"][kslot(t)], t // depth)
            yield
            if c["pb"][b] != (t, 4) or c["slot"][kslot(t)] != t:
                raise Fooled(f"CTA {r}: tile {t}'s P or V changed under the PV group")
            if t + 2 < ntiles:
                c["p_empty"][b].arrive()
            if t + depth < ntiles:
                load(t + depth)
        yield from wait(c["stats"], 0)

    def qk(r, q):
        c, other = ctas[r], ctas[r ^ 1]

        def mma(t):
            if c["slot"][kslot(t)] != t:
                raise Fooled(f"CTA {r} warp {q}: slot holds tile {c['slot'][kslot(t)]}, not {t}")
            c["reading"][q] = t

        def swap(t):
            b = t & 1
            c["sx"][b][q ^ 1] = t
            yield from c["pair"][q >> 1].sync()
            if c["sx"][b][q] != t:
                raise Fooled(f"CTA {r} warp {q}: in-CTA swap buffer holds {c['sx'][b][q]}, not {t}")

        def send(t):
            b = t % xs_buffers
            if not other["xs_read"][b][q]:
                raise Fooled(f"CTA {r} warp {q}: tile {t} overwrites the partner's unread tile {other['xs'][b][q]}")
            other["xs"][b][q], other["xs_read"][b][q] = t, False
            other["x_full"][b][q].complete_tx(X_BYTES)

        def recv(t):
            b = t % xs_buffers
            c["x_full"][b][q].arrive(expect_tx=X_BYTES)
            yield from wait(c["x_full"][b][q], t // xs_buffers)
            if c["xs"][b][q] != t:
                raise Fooled(f"CTA {r} warp {q}: cluster swap buffer holds {c['xs'][b][q]}, not {t}")
            c["xs_read"][b][q] = True

        def publish(t):
            b = t & 1
            if t >= 2:
                yield from wait(c["p_empty"][b], (t >> 1) - 1)
            c["pb"][b] = (t, c["pb"][b][1] + 1 if c["pb"][b] and c["pb"][b][0] == t else 1)
            c["p_full"][b].arrive()

        if draft and not pipelined_draft:
            for t in range(ntiles):
                yield from wait(c["full"][kslot(t)], t // depth)
                mma(t)
                yield
                yield from swap(t)
                send(t)
                yield from recv(t)
                yield from publish(t)
                c["reading"][q] = None
        else:
            yield from wait(c["full"][kslot(0)], 0)
            mma(0)
            yield
            yield from swap(0)
            send(0)
            for t in range(ntiles):
                more = t + 1 < ntiles
                if more:
                    yield from wait(c["full"][kslot(t + 1)], (t + 1) // depth)
                mma(t + 1 if more else t)
                yield
                yield from recv(t)
                yield from publish(t)
                if more:
                    yield from swap(t + 1)
                    send(t + 1)
            c["reading"][q] = None
        c["stats"].arrive()

    procs = [pv(0), pv(1)] + [qk(r, q) for r in range(2) for q in range(4)]
    alive = list(range(len(procs)))
    for _ in range(200_000):
        if not alive:
            return
        i = rng.choice(alive)
        try:
            next(procs[i])
        except StopIteration:
            alive.remove(i)
    raise RuntimeError(f"deadlock: {ntiles} tiles, draft={draft}, seed {seed}, {len(alive)} processes waiting")


@pytest.mark.parametrize("draft", [False, True])
@pytest.mark.parametrize("ntiles", range(1, 7))
def test_the_cluster_hand_offs_hold_under_random_schedules(ntiles, draft):
    for seed in range(60):
        simulate(ntiles, draft, seed)


def test_the_model_catches_a_cluster_swap_buffer_reused_too_soon():
    """One buffer per QK warp instead of two: the partner's next partial overwrites the one not yet read."""
    with pytest.raises(Fooled, match="overwrites the partner's unread tile"):
        for seed in range(200):
            simulate(4, False, seed, xs_buffers=1)


def test_the_model_catches_a_pipelined_draft_block_on_a_one_slot_ring():
    """The draft block holds K and V of one tile at a time: pipelined, its QK warps would wait for a tile the PV
    group loads only after the P they have not published."""
    with pytest.raises(RuntimeError, match="deadlock"):
        simulate(3, True, 0, pipelined_draft=True)
