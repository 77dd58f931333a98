"""kdtree_lab.generate on a CPU: the absorbed fp32 forward against transformers' DeepseekV3 (logits, and greedy
decoding against ``model.generate``), the draft names, greedy acceptance, the latent pool, the token comparison,
the loop's slot bookkeeping, whole runs of ``run.generate`` and ``kdtree-lab generate``'s exit codes.

Models are tiny (2 layers, hidden 64) and trained for a few steps. On the standard library's text such a model
emits spaces only, which says little about the loop, so some tests also train on a text a tiny model learns in 20
steps (the alphabet, line after line) and continues with varied tokens; and since such a model is nearly a bigram
model, blind to attention, masks and positions, others take untrained weights drawn large ("sharp"), whose logits
move by units when any of those is wrong. The check's own bound calibrates itself on the tokens that agree (a path
wrong everywhere explains its own mismatches), so the loop's logits are also held within bf16's own difference
from fp32, measured without the loop. Seeds drawn fresh per run are named in every assertion message that depends
on them."""

import json
import os
import random

import numpy as np
import pytest
import torch

from kdtree_lab.cli import generate as cli_generate
from kdtree_lab.cli.main import main
from kdtree_lab.core.mla import D_QK, D_V
from kdtree_lab.core.tree import DraftTree, chain, random_tree
from kdtree_lab.generate import attend, check, corpus, drafts, forward, model, pool, run
from kdtree_lab.generate.loop import Engine, accept
from test_cli_contract import _one_line
from test_cli_contract import _outcome as cli_outcome

TINY = dict(layers=2, hidden=64, ffn=128)
ALPHABET = b"abcdefghijklmnopqrstuvwxyz\n" * 4000  # learnt in 20 steps: varied tokens, drafts that sometimes miss
NO_POOL = torch.zeros(1, 1, D_QK)
NO_CTX = torch.zeros(0, dtype=torch.int64)


def fresh_seed() -> int:
    return random.SystemRandom().randrange(2**31)


def causal_logits(w: model.Weights, ids: torch.Tensor, layers: int | None = None, kv: str = "bf16") -> torch.Tensor:
    """The absorbed forward over the whole sequence (the first ``layers``: 1 is the draft model), causal fp32
    reference attention, no pool. ``kv="fp8"``: every key row rounded to e4m3 (unscaled) before it is attended, as an
    fp8 pool stores it (the loop's greedy decode writes a token's row and then reads it from the pool)."""
    n = ids.numel()

    def attention(i, q, k):
        if kv == "fp8":
            k = k.to(torch.float8_e4m3fn).to(k.dtype)
        return attend.reference_attention(q, NO_POOL, [NO_CTX], k, k[:, :D_V], [(0, n)], [None], w.sm_scale)

    return forward.forward(w, ids, torch.arange(n), attention, layers=layers)


def _sharp_weights(m, seed: int, scale: float) -> None:
    """Redraw ``m``'s matrices with std scale / sqrt(fan-in): logits of a few units and attention far from uniform
    (transformers' init, 0.02, leaves attention nearly uniform)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * (scale / p.shape[1] ** 0.5))


@pytest.fixture(scope="module")
def alphabet_model() -> corpus.Trained:
    """Trained 20 steps on ALPHABET (fixed seed: its outputs are varied, checked where it matters)."""
    return corpus.train(model.ModelSpec(heads=8, seed=0, **TINY), corpus.TrainSpec(steps=20, batch=4, seq=64), "cpu",
                        ALPHABET)


# ---- 1. the absorbed fp32 forward equals transformers' logits ---------------------------------------------------

@pytest.mark.parametrize("init", ["default", "sharp"])
@pytest.mark.parametrize("heads", [8, 16])
def test_absorbed_fp32_forward_equals_transformers_logits(heads, init):
    """transformers' DeepseekV3ForCausalLM against forward.forward with reference_attention, causal, at random ids.
    ``sharp``: weights redrawn far larger than transformers' init, so attention is far from uniform (at the default
    init a rope or mask error moves the logits by ~1e-3 only)."""
    seed = fresh_seed()
    spec = model.ModelSpec(heads=heads, seed=seed % 10_000, **TINY)
    m = model.build(spec)
    gen = torch.Generator().manual_seed(seed)
    if init == "sharp":
        _sharp_weights(m, seed + 1, 0.8)
    w = model.absorbed(m, spec, torch.float32)
    assert w.dtype == torch.float32 and len(w.layers) == 2 and w.layers[0].w_uk.shape == (heads, 128, D_V)
    ids = torch.randint(0, 256, (40,), generator=gen)
    with torch.no_grad():
        ref = m(input_ids=ids[None]).logits[0].float()
        ours = causal_logits(w, ids)
    assert ours.shape == ref.shape == (40, 256)
    diff = float((ours - ref).abs().max())
    assert diff < 1e-4, f"seed {seed}: max |absorbed - transformers| = {diff} (logits up to {float(ref.abs().max())})"
    assert float(ref.std()) > 1e-3, "degenerate logits prove nothing"


# ---- 2. fp32 greedy decoding equals transformers' generate -------------------------------------------------------

def test_fp32_greedy_decoding_equals_transformers_generate(alphabet_model):
    """Our greedy loop (the absorbed fp32 forward over the whole sequence every step) against
    ``model.generate(do_sample=False)`` (transformers' KV cache) on the same trained, bf16-rounded weights."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    m = alphabet_model.model
    for p in m.parameters():  # the weights are exactly bf16 values (round_weights)
        assert torch.equal(p, p.to(torch.bfloat16).float())
    w = model.absorbed(m, alphabet_model.spec, torch.float32)
    stdlib = corpus.text(1 << 16)
    prompts = []
    for _ in range(3):
        n, s = int(rng.integers(8, 40)), int(rng.integers(0, len(ALPHABET) - 64))
        prompts.append(list(ALPHABET[s:s + n]))
    s = int(rng.integers(0, len(stdlib) - 64))
    prompts.append(list(stdlib[s:s + 32]))
    prompts.append(rng.integers(0, 256, int(rng.integers(4, 24))).tolist())
    outs = []
    for prompt in prompts:
        ids = list(prompt)
        margins = []
        with torch.no_grad():
            for _ in range(16):
                row = causal_logits(w, torch.tensor(ids))[-1]
                top2 = row.topk(2).values
                margins.append(float(top2[0] - top2[1]))
                ids.append(int(row.argmax()))
            theirs = m.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                do_sample=False, max_new_tokens=16)[0, len(prompt):].tolist()
        ours = ids[len(prompt):]
        assert len(theirs) == 16
        assert ours == theirs, (f"seed {seed}: prompt {bytes(prompt)!r}: ours {bytes(ours)!r}, transformers "
                                f"{bytes(theirs)!r} (our top-2 margins {margins})")
        outs += ours
    assert len(set(outs)) >= 4, f"seed {seed}: degenerate outputs {bytes(outs)!r} prove little"


# ---- 3. draft names ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kind,num_draft,forwards", [
    ("chain-4", "chain", 5, 4), ("chain-1", "chain", 2, 1), ("chain-15", "chain", 16, 15),
    ("eagle-4x3-16", "eagle", 16, 3), ("eagle-2x2-4", "eagle", 4, 2), ("eagle-1x1-2", "eagle", 2, 1),
    ("eagle-2x3-11", "eagle", 11, 3),  # 1 + 2 + 2 * 4 = 11: the most topk 2 x 3 steps draft
    ("ddtree-32-8", "ddtree", 32, 8), ("ddtree-6-3", "ddtree", 6, 3), ("ddtree-2-1", "ddtree", 2, 1),
])
def test_draft_names_round_trip(name, kind, num_draft, forwards):
    cfg = drafts.parse(name)
    assert (cfg.kind, cfg.num_draft, cfg.forwards, cfg.name) == (kind, num_draft, forwards, name)
    assert drafts.parse(cfg.name) == cfg
    assert drafts.parse(f"  {name.upper()} ") == cfg


@pytest.mark.parametrize("name", [
    "chain-0", "chain-16", "chain-99",  # a chain takes 1..15
    "eagle-4x3-99", "eagle-2x3-12", "eagle-1x1-3",  # more tokens than topk x steps draft
    "eagle-0x3-4", "eagle-4x0-4", "eagle-4x3-1",
    "ddtree-1-3", "ddtree-0-3", "ddtree-32-0",
    "tree-4", "chain4", "chain-", "chain--4", "eagle-4x3", "eagle-4-3-16", "ddtree-32", "chain-4-1", "", "  ",
    "chain-4,eagle-4x3-16",
])
def test_malformed_and_oversize_draft_names_raise_naming_the_draft(name):
    with pytest.raises(ValueError) as info:
        drafts.parse(name)
    message = str(info.value)
    assert message.startswith("draft"), message
    assert name.strip().lower() in message, message


# ---- 4. greedy acceptance ------------------------------------------------------------------------------------------

def _tree(parents, tokens) -> DraftTree:
    return DraftTree(np.array(parents, dtype=np.int64), np.array(tokens, dtype=np.int64), np.ones(len(parents)))


def test_acceptance_on_hand_built_trees():
    c = chain(4)
    line = DraftTree(c.parents, np.array([7, 1, 2, 3]), c.scores)
    assert accept(line, np.array([1, 2, 3, 9])) == [1, 2, 3]  # every draft accepted (9 is the bonus)
    assert accept(line, np.array([5, 2, 3, 9])) == []  # rejected at the first draft
    assert accept(line, np.array([1, 2, 4, 3])) == [1, 2]  # rejected at the third
    assert accept(chain(1), np.array([42])) == []  # the root alone: nothing to accept
    # root 7 with children 4 (node 1) and 5 (node 2); node 1 has child 6 (node 3), node 2 has child 8 (node 4)
    tree = _tree([-1, 0, 0, 1, 2], [7, 4, 5, 6, 8])
    assert accept(tree, np.array([5, 6, 8, 0, 0])) == [2, 4]  # the second child matches, then its child
    assert accept(tree, np.array([4, 6, 8, 0, 0])) == [1, 3]  # the first child, then its child
    assert accept(tree, np.array([5, 6, 9, 0, 0])) == [2]  # the second child, its child rejected
    assert accept(tree, np.array([9, 4, 5, 6, 8])) == []  # the target's root token matches no child
    # a later sibling deeper in the list: nodes 1..3 children of the root, the match is the last
    wide = _tree([-1, 0, 0, 0, 3, 4], [0, 10, 11, 12, 13, 14])
    assert accept(wide, np.array([12, 0, 0, 13, 14, 99])) == [3, 4, 5]


def _longest_matching_path(tree: DraftTree, target: np.ndarray) -> list[int]:
    best: list[int] = []
    for node in range(1, tree.size):
        path, x = [], node
        while x > 0:
            path.append(x)
            x = int(tree.parents[x])
        path = path[::-1]
        if all(int(tree.tokens[n]) == int(target[tree.parents[n]]) for n in path) and len(path) > len(best):
            best = path
    return best


def test_acceptance_is_the_longest_matching_path_of_random_trees():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(1, 24))
        shape = random_tree(n, rng)
        tokens = np.zeros(n, dtype=np.int64)
        for p in range(n):  # siblings carry distinct tokens, as every drafter gives them
            kids = np.flatnonzero(shape.parents == p)
            tokens[kids] = rng.choice(6, size=len(kids), replace=False) if len(kids) <= 6 else np.arange(len(kids))
        tree = DraftTree(shape.parents, tokens, shape.scores)
        target = rng.integers(0, 6, n)
        assert accept(tree, target) == _longest_matching_path(tree, target), (seed, shape.parents, tokens, target)


# ---- 5. the latent pool --------------------------------------------------------------------------------------------

def test_pool_hands_out_and_takes_back_slots():
    p = pool.LatentPool(layers=2, slots=5, kv_dtype="bf16")
    assert (p.size, p.free_slots, p.used_slots) == (5, 5, 0)
    assert len(p.buffers) == 2 and all(b.shape == (6, 1, D_QK) and b.dtype == torch.bfloat16 for b in p.buffers)
    a = p.alloc(3)
    assert a == [1, 2, 3] and (p.free_slots, p.used_slots) == (2, 3)  # the lowest first, slot 0 never
    assert p.alloc(0) == [] and p.free_slots == 2
    with pytest.raises(pool.PoolFull, match="3 slots asked for, 2 of 5 free"):
        p.alloc(3)
    assert p.free_slots == 2, "a refused alloc takes nothing"
    p.free([2])
    assert (p.free_slots, p.used_slots) == (3, 2)
    assert p.alloc(1) == [2]  # the slot just given back
    b = p.alloc(2)
    assert sorted(b) == [4, 5] and p.free_slots == 0
    with pytest.raises(pool.PoolFull):
        p.alloc(1)
    for bad in ([0], [6], [-1]):
        with pytest.raises(ValueError, match="slots"):
            p.free(bad)
    assert p.free_slots == 0
    p.free([1, 2, 3, 4, 5])
    assert p.free_slots == 5 and p.alloc(5) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="slots"):
        pool.LatentPool(1, 0)
    with pytest.raises(ValueError, match="kv_dtype"):
        pool.LatentPool(1, 4, "fp16")


def test_pool_random_alloc_and_free_never_hands_out_a_slot_in_use():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    p = pool.LatentPool(1, 40)
    used: set[int] = set()
    for _ in range(500):
        if rng.random() < 0.55:
            n = int(rng.integers(0, 8))
            if n > p.free_slots:
                with pytest.raises(pool.PoolFull):
                    p.alloc(n)
                continue
            got = p.alloc(n)
            assert len(set(got)) == n and not used & set(got) and all(1 <= s <= 40 for s in got), seed
            used |= set(got)
        elif used:
            back = [int(s) for s in rng.choice(sorted(used), size=int(rng.integers(1, len(used) + 1)), replace=False)]
            p.free(back)
            used -= set(back)
        assert (p.used_slots, p.free_slots) == (len(used), 40 - len(used)), seed


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_pool_writes_cast_to_the_pools_dtype(kv):
    seed = fresh_seed()
    gen = torch.Generator().manual_seed(seed)
    p = pool.LatentPool(layers=2, slots=8, kv_dtype=kv)
    want = torch.bfloat16 if kv == "bf16" else torch.float8_e4m3fn
    assert all(b.dtype == want for b in p.buffers)
    rows = torch.randn(3, D_QK, generator=gen) * 3
    rows[0, 0], rows[0, 1] = 0.3, 1000.0
    slots = torch.tensor([5, 2, 7])
    p.write(1, slots, rows)
    stored = p.buffers[1][slots, 0]
    assert stored.dtype == want
    assert torch.equal(stored.float(), rows.to(want).float()), seed
    if kv == "fp8":  # e4m3 keeps 3 mantissa bits and saturates at 448, as an unscaled SGLang write does
        assert float(stored[0, 0]) == 0.3125 and float(stored[0, 1]) == 448.0
        assert not torch.equal(stored.float(), rows.to(torch.bfloat16).float())
    untouched = torch.ones(9, dtype=torch.bool)
    untouched[slots] = False
    assert not p.buffers[1][untouched].float().any(), "only the written slots (never slot 0) change"
    assert not p.buffers[0].float().any(), "only the written layer changes"


# ---- 6. the token comparison ---------------------------------------------------------------------------------------

def test_compare_counts_agreement_near_ties_wide_mismatches_and_self_mismatches():
    """Two requests of three tokens. Request 0: an agreement; a near-tie mismatch (reference margin 0.02); an
    agreement where the path is off by 0.1 (the largest difference among agreeing tokens: bound 0.2). Request 1: a
    wide-margin mismatch (3.5); a self mismatch (the emitted token is the reference's argmax but not its own row's);
    an agreement."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    v = 8
    ref = [rng.uniform(-3.0, -1.0, (3, v)) for _ in range(2)]
    path = [r + rng.uniform(-0.05, 0.05, r.shape) for r in ref]
    ref[0][0, 3] = 2.0
    path[0][0, 3] = 2.0  # agree on 3
    ref[0][1, 5], ref[0][1, 6] = 1.00, 0.98
    path[0][1, 5], path[0][1, 6] = 1.00, 1.02  # the path picks 6 at a near-tie
    ref[0][2, 1] = 1.5
    path[0][2, 1] = 1.6  # agree on 1, 0.1 apart
    ref[1][0, 2], ref[1][0, 7] = 4.0, 0.5
    path[1][0, 2], path[1][0, 7] = 4.0, 6.0  # the path picks 7 where the reference's margin is 3.5
    ref[1][1, 4], ref[1][1, 0] = 1.00, 0.99
    path[1][1, 4], path[1][1, 0] = 1.00, 1.02  # its row's argmax is 0, yet 4 was emitted
    ref[1][2, 0] = 1.0
    path[1][2, 0] = 1.0
    emitted = [[3, 6, 1], [7, 4, 0]]
    tc = check.compare(emitted, path, ref)
    assert tc.compared == 6
    assert tc.self_mismatches == 1
    assert tc.bound == pytest.approx(0.2), seed
    got = [(m["request"], m["index"], m["explained"]) for m in tc.mismatches]
    assert got == [(0, 1, True), (1, 0, False)], (seed, tc.mismatches)
    assert tc.mismatches[0]["margin"] == pytest.approx(0.02) and tc.mismatches[1]["margin"] == pytest.approx(3.5)
    assert tc.mismatches[1]["diff"] == pytest.approx(5.5)
    assert tc.unexplained == 2  # the wide mismatch and the self mismatch
    d = tc.as_dict()
    assert (d["compared"], d["explained"], d["unexplained"], d["self_mismatches"]) == (6, 1, 2, 1)
    assert d["margin_quantiles"]["q00"] == pytest.approx(0.01) and d["diff_quantiles"]["q100"] == pytest.approx(5.5)
    json.dumps(d)
    # the same tokens emitted by a path equal to the reference: nothing to report
    same = check.compare([[3, 5, 1], [2, 4, 0]], ref, ref)
    assert (same.self_mismatches, same.mismatches, same.unexplained, same.bound) == (0, [], 0, 0.0)


def test_first_divergence():
    assert check.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert check.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert check.first_divergence([4], [5, 6]) == 0
    assert check.first_divergence([1, 2], [1, 2, 3]) is None


# ---- the attention the loop and the check read the pool through ---------------------------------------------------

def test_reference_attention_over_pool_slots_and_tree_masks_equals_causal_attention():
    """Context rows read from scattered pool slots plus extend rows equal causal attention over the whole sequence;
    a tree mask's rows equal causal attention over the context and each row's ancestors."""
    seed = fresh_seed()
    gen = torch.Generator().manual_seed(seed)
    t, length, heads, scale = 30, 18, 8, 0.1
    q = torch.randn(t, heads, D_QK, generator=gen)
    k = torch.randn(t, D_QK, generator=gen)

    def causal(qq, kk):
        n = kk.shape[0]
        return attend.reference_attention(qq, NO_POOL, [NO_CTX], kk, kk[:, :D_V], [(0, n)], [None], scale)

    full = causal(q, k)
    buf = torch.randn(64, 1, D_QK, generator=gen)  # other slots hold garbage
    slots = torch.randperm(63, generator=gen)[:length] + 1
    buf[slots, 0] = k[:length]
    # two requests in one call: request 0 is the sequence above, request 1 its first 10 tokens split 6 + 4
    buf2 = buf.clone()
    keep = torch.ones(64, dtype=torch.bool)
    keep[slots] = False
    slots1 = torch.tensor([s for s in range(1, 64) if keep[s]][:6])
    buf2[slots1, 0] = k[:6]
    qx = torch.cat([q[length:], q[6:10]])
    kx = torch.cat([k[length:], k[6:10]])
    out = attend.reference_attention(qx, buf2, [slots, slots1], kx, kx[:, :D_V], [(0, t - length), (t - length,
                                     t - length + 4)], [None, None], scale, budget_bytes=4096)
    assert torch.allclose(out[: t - length], full[length:], atol=1e-5), seed
    assert torch.allclose(out[t - length:], full[6:10], atol=1e-5), seed
    # a tree of 6 nodes after the context: each node sees the context, its ancestors and itself
    tree = _tree([-1, 0, 0, 1, 2, 1], [0] * 6)
    qt = torch.randn(6, heads, D_QK, generator=gen)
    kt = torch.randn(6, D_QK, generator=gen)
    mask = torch.from_numpy(tree.ancestor_mask())
    got = attend.reference_attention(qt, buf, [slots], kt, kt[:, :D_V], [(0, 6)], [mask], scale)
    for node in range(6):
        seen = np.flatnonzero(tree.ancestor_mask()[node])  # ancestors in order, the node last
        seq_k = torch.cat([k[:length], kt[seen]])
        seq_q = torch.cat([q[:length], qt[seen]])
        assert torch.allclose(got[node], causal(seq_q, seq_k)[-1], atol=1e-5), (seed, node)


# ---- the loop's slot bookkeeping -----------------------------------------------------------------------------------

def _slots_in_order(engine: Engine) -> None:
    """Every committed slot is distinct, in the pool's range, and the pool's used count is exactly theirs."""
    committed = [s for i, r in enumerate(engine.requests) for s in engine.req_to_token[i, :r.length].tolist()]
    assert len(set(committed)) == len(committed), "a slot committed twice"
    assert all(1 <= s <= engine.pool.size for s in committed)
    assert engine.pool.used_slots == len(committed), "draft or rejected slots not given back"
    for r in engine.requests:
        assert r.length == len(r.prompt) + len(r.emitted) - 1  # the pending token has no KV yet
        assert sum(r.accepts) == len(r.emitted) == len(r.logits)


@pytest.fixture(scope="module")
def sharp_model() -> tuple:
    """Untrained, sharp weights rounded to bf16: attention, positions and masks move its logits by units, where
    the alphabet model (a bigram model after 20 steps) barely notices them; its drafts are mostly rejected."""
    spec = model.ModelSpec(heads=8, seed=0, **TINY)
    m = model.build(spec)
    _sharp_weights(m, 1, 1.5)
    return model.round_weights(m), spec


@pytest.mark.parametrize("which,kv", [("alphabet", "bf16"), ("sharp", "bf16"), ("sharp", "fp8")])
def test_engine_keeps_its_slots_and_emits_greedy_tokens(request, which, kv):
    """Prompts of different lengths (so the per-request offsets matter); after every step of greedy and speculative
    decoding the pool holds exactly the committed slots; every run's tokens pass the fp32 check with logits within
    bf16's own difference from fp32 (measured without the loop, over key rows as the pool stores them: an fp8 pool's
    rounded to e4m3), and a speculative run's tokens equal the greedy run's up to the first mismatch either has. The
    fp8 case is the one bound over an fp8 pool that no run calibrates on itself."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    if which == "alphabet":
        trained = request.getfixturevalue("alphabet_model")
        m, spec = trained.model, trained.spec
    else:
        m, spec = request.getfixturevalue("sharp_model")
    w = model.absorbed(m, spec, torch.bfloat16)
    w32 = model.absorbed(m, spec, torch.float32)
    prompts = []
    for n in (int(rng.integers(10, 20)), int(rng.integers(25, 40)), int(rng.integers(2, 6))):
        s = int(rng.integers(0, len(ALPHABET) - 64))
        prompts.append(list(ALPHABET[s:s + n]))
    configs = [drafts.parse(d) for d in ("chain-3", "eagle-2x2-5", "ddtree-7-3")]
    new = 14
    engine = Engine(w, prompts, new, kv, torch.device("cpu"), num_draft=max(d.num_draft for d in configs),
                    forwards=max(d.forwards for d in configs) * 2)
    engine.prefill()
    _slots_in_order(engine)
    saved = engine.save()

    def checked(eng: Engine, what: str):
        emitted = [r.emitted[:new] for r in eng.requests]
        refs = [check.reference_logits(w32, eng.pool.buffers, saved[2][b, :len(r.prompt) - 1], r.prompt,
                                       emitted[b]).numpy() for b, r in enumerate(eng.requests)]
        tc = check.compare(emitted, [np.stack(r.logits[:new]) for r in eng.requests], refs)
        assert tc.self_mismatches == 0 and tc.unexplained == 0, (seed, which, kv, what, tc.as_dict())
        first = [min([m["index"] for m in tc.mismatches if m["request"] == b], default=new) for b in range(len(prompts))]
        return emitted, first, tc

    engine.restore(saved, 1)
    while not engine.done():
        engine.greedy_step()
        _slots_in_order(engine)
    greedy, greedy_first, greedy_tc = checked(engine, "greedy")
    assert all(len(t) == new for t in greedy)
    assert len(set(sum(greedy, []))) >= 4, f"seed {seed}: degenerate outputs {greedy}"
    # the numerical difference to expect, measured without the loop or the pool: the bf16 forward against the
    # fp32 one over each prompt and its greedy tokens (both causal over the whole sequence, key rows as the pool
    # stores them)
    whole, numeric = [], 0.0
    for r, toks in zip(engine.requests, greedy):
        seq = torch.tensor(r.prompt + toks[:-1])
        with torch.no_grad():
            ref = causal_logits(w32, seq, kv=kv)[len(r.prompt) - 1:]
            numeric = max(numeric, float((causal_logits(w, seq, kv=kv)[len(r.prompt) - 1:] - ref).abs().max()))
        whole.append(ref.numpy())
    limit = 3 * numeric + 0.01
    assert greedy_tc.diff_quantiles["q100"] <= limit, (seed, which, kv, numeric, greedy_tc.as_dict())
    # check.reference_logits trusts the prompt's rows as the pool holds them; against the forward that never reads
    # the pool the greedy tokens pass as well and sit as close: the prefill wrote the prompt's rows right
    tc = check.compare(greedy, [np.stack(r.logits[:new]) for r in engine.requests], whole)
    assert tc.unexplained == 0 and tc.diff_quantiles["q100"] <= limit, (seed, which, kv, numeric, tc.as_dict())
    accepts = {}
    for cfg in configs:
        engine.restore(saved, cfg.num_draft)
        drafter = drafts.Drafter(engine, cfg)
        while not engine.done():
            engine.spec_step(drafter, "reference", graphs=False)
            _slots_in_order(engine)
            assert max(engine.requests[0].accepts[1:]) <= cfg.forwards + 1
        toks, first, tc = checked(engine, cfg.name)
        assert tc.diff_quantiles["q100"] <= limit, (seed, which, kv, cfg.name, numeric, tc.as_dict())
        for b in range(len(prompts)):
            k = min(first[b], greedy_first[b])
            assert toks[b][:k] == greedy[b][:k], (seed, which, kv, cfg.name, b, toks[b], greedy[b])
        accepts[cfg.name] = [a for r in engine.requests for a in r.accepts[1:]]
    assert all(a >= 1 for v in accepts.values() for a in v)
    if which == "alphabet":
        assert any(a > 1 for v in accepts.values() for a in v), f"seed {seed}: no draft ever accepted: {accepts}"


def test_drafts_follow_the_first_layer_exit(sharp_model):
    """Each drafter's tree against the draft model (the first layer's exit) run in fp32 without the pool over the
    prompt and the node's path: a chain is its greedy continuation; an EAGLE node's token is among the top-k after
    its parent and its score is its path's probability; a DDTree node's score is the product of the per-depth
    probabilities along the greedy chain. Drafting gives every draft slot back."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    m, spec = sharp_model
    w = model.absorbed(m, spec, torch.bfloat16)
    w32 = model.absorbed(m, spec, torch.float32)
    prompts = [rng.integers(0, 256, int(rng.integers(8, 30))).tolist() for _ in range(2)]
    cfgs = {d: drafts.parse(d) for d in ("chain-4", "eagle-2x3-8", "ddtree-8-3")}
    engine = Engine(w, prompts, 8, "bf16", torch.device("cpu"), num_draft=8, forwards=6)
    engine.prefill()
    used = engine.pool.used_slots
    roots = [r.pending for r in engine.requests]
    ctx = [engine.req_to_token[i, :r.length] for i, r in enumerate(engine.requests)]
    trees = {}
    for name, cfg in cfgs.items():
        engine.restore(engine.save(), cfg.num_draft)
        trees[name] = drafts.Drafter(engine, cfg).draft(roots, ctx)
        assert engine.pool.used_slots == used, f"{name}: draft slots kept"
        for b, t in enumerate(trees[name]):
            assert t.size == cfg.num_draft and int(t.tokens[0]) == roots[b] and (t.tokens[1:] >= 0).all()

    cache: dict[tuple, torch.Tensor] = {}

    def logp(b: int, path: list[int]) -> torch.Tensor:
        """fp32 log-probabilities of the draft model after prompt b and ``path`` (the root first)."""
        key = (b, tuple(path))
        if key not in cache:
            with torch.no_grad():
                cache[key] = torch.log_softmax(causal_logits(w32, torch.tensor(prompts[b] + path), layers=1)[-1], -1)
        return cache[key]

    def path_to(t: DraftTree, j: int) -> list[int]:
        out = []
        while j >= 0:
            out.append(int(t.tokens[j]))
            j = int(t.parents[j])
        return out[::-1]

    tol = 0.1  # bf16 weights and pool against fp32, in log-probability
    for b in range(2):
        line = trees["chain-4"][b]
        assert line.parents.tolist() == [-1, 0, 1, 2, 3]
        for j in range(1, line.size):
            lp = logp(b, path_to(line, j - 1))
            assert float(lp[int(line.tokens[j])]) >= float(lp.max()) - tol, (seed, b, j, line.tokens)
        eagle = trees["eagle-2x3-8"][b]
        assert (eagle.depths <= 3).all() and (np.diff(eagle.depths) >= 0).all()
        for j in range(1, eagle.size):
            p = int(eagle.parents[j])
            lp = logp(b, path_to(eagle, p))
            token = int(eagle.tokens[j])
            assert float(lp[token]) >= float(lp.topk(2).values[-1]) - tol, (seed, b, j, eagle.tokens)
            want = float(np.log(eagle.scores[p])) + float(lp[token])
            assert abs(float(np.log(eagle.scores[j])) - want) < tol * eagle.depths[j], (seed, b, j, eagle.scores)
        dd = trees["ddtree-8-3"][b]
        chain_tokens = [int(x) for x in line.tokens]  # the greedy chain the DDTree's depths are drawn along
        for j in range(1, dd.size):
            d = int(dd.depths[j])
            lp = logp(b, chain_tokens[:d])
            want = float(np.log(dd.scores[int(dd.parents[j])])) + float(lp[int(dd.tokens[j])])
            assert abs(float(np.log(dd.scores[j])) - want) < tol * d, (seed, b, j, dd.tokens, dd.scores)


# ---- 7. whole runs -------------------------------------------------------------------------------------------------

def _generate_spying(monkeypatch, spec: run.GenerateSpec) -> tuple[dict, list[list[list[int]]]]:
    """run.generate(spec) and, per run in the order of result["runs"], the tokens it compared."""
    compared: list[list[list[int]]] = []
    real = run.compare

    def spy(emitted, path_logits, ref_logits, bound=None):
        compared.append([[int(t) for t in e] for e in emitted])
        return real(emitted, path_logits, ref_logits, bound)

    monkeypatch.setattr(run, "compare", spy)
    result = run.generate(spec)
    assert len(compared) == len(result["runs"])
    return result, compared


def _check_runs(spec: run.GenerateSpec, result: dict, tokens: list[list[list[int]]], why: str) -> None:
    cfgs = {d: drafts.parse(d) for d in spec.drafts}
    per_group = 1 + len(spec.drafts) * len(spec.paths)
    assert len(result["runs"]) == len(spec.heads) * len(spec.pools) * len(spec.contexts) * per_group, why
    assert not result["interrupted"] and run.problems(result) == [], (why, run.problems(result))
    for g in range(0, len(result["runs"]), per_group):
        greedy_row, greedy = result["runs"][g], tokens[g]
        assert greedy_row["draft"] == "none (greedy)" and greedy_row["accept_length"] == 1.0
        assert greedy_row["steps"] == spec.new_tokens - 1
        greedy_first = [min([m["index"] for m in greedy_row["check"]["mismatches"] if m["request"] == b],
                            default=spec.new_tokens) for b in range(spec.prompts)]
        for row, toks in zip(result["runs"][g:g + per_group], tokens[g:g + per_group]):
            where = f"{why}: {row['pool']} {row['draft']} {row['path']}"
            c = row["check"]
            assert c["compared"] == spec.prompts * spec.new_tokens, where
            assert c["unexplained"] == 0 and c["self_mismatches"] == 0, (where, c)
            assert row["tokens"] == spec.prompts * (spec.new_tokens - 1), where
            assert all(len(t) == spec.new_tokens for t in toks), where
            assert row["accept_length"] >= 1, where
            if row["draft"] != "none (greedy)":
                assert row["accept_length"] <= cfgs[row["draft"]].forwards + 1, where
                assert row["num_draft"] == cfgs[row["draft"]].num_draft
            assert row["diverges_from_greedy"] == sum(t != gt for t, gt in zip(toks, greedy)), where
            # the check's bound calibrates itself on the agreeing tokens, so a path wrong everywhere explains its
            # own mismatches; its logits must sit as close to the reference as plain greedy decoding's
            numeric = greedy_row["check"]["diff_quantiles"]["q100"]
            assert c["diff_quantiles"]["q100"] <= 3 * numeric + 0.01, (where, numeric, c["diff_quantiles"])
            for b in range(spec.prompts):  # equal wherever neither run's check reports a mismatch
                first = min([m["index"] for m in c["mismatches"] if m["request"] == b], default=spec.new_tokens)
                k = min(first, greedy_first[b])
                assert toks[b][:k] == greedy[b][:k], (where, b, toks[b], greedy[b])


SMALL_RUN = dict(heads=(8,), train_steps=20, train_batch=4, train_seq=64, contexts=(48,), prompts=2, new_tokens=16,
                 drafts=("chain-3", "eagle-2x2-4", "ddtree-6-3"), paths=("reference",), pools=("bf16", "fp8"),
                 device="cpu", **TINY)


def test_a_whole_run_on_the_standard_library_text(monkeypatch):
    spec = run.GenerateSpec(**SMALL_RUN)
    result, tokens = _generate_spying(monkeypatch, spec)
    assert result["corpus"]["bytes"] == len(corpus.text())
    assert [m["heads"] for m in result["models"]] == [8] and len(result["models"][0]["losses"]) >= 1
    _check_runs(spec, result, tokens, "standard library text, seed 0")
    table = run.rows(result)
    assert len(table) == 8 and all(r["compared"] == 32 and r["unexplained"] == 0 for r in table)
    json.dumps(result, default=float)


def test_a_whole_run_on_a_learnable_text_emits_varied_tokens(monkeypatch):
    """The same run on ALPHABET, a fresh seed: varied tokens, and a chain or EAGLE draft rejected at times (the DDTree
    rows do not count: the tiny draft model's distributions are flat, top probability 0.04-0.06, so the best-first
    tree of 6 nodes is five depth-1 siblings and rejects some every step whatever the seed). The tiny model
    trained 20 steps from some seeds settles into a loop of two or three tokens (none of seeds 0-39; seed 1074312161
    does), and from about one seed in six its chains and EAGLE trees are accepted whole at every step; such a run is
    still checked in full, and the test draws another seed, five at most."""
    monkeypatch.setattr(corpus, "text", lambda max_bytes=8 << 20: ALPHABET)
    uninformative = []
    for _ in range(5):
        seed = fresh_seed()
        spec = run.GenerateSpec(**SMALL_RUN | dict(seed=seed))
        with pytest.MonkeyPatch.context() as spying:
            result, tokens = _generate_spying(spying, spec)
        assert result["corpus"]["bytes"] == len(ALPHABET)
        _check_runs(spec, result, tokens, f"alphabet text, seed {seed}")
        varied = len({t for run_tokens in tokens for toks in run_tokens for t in toks}) >= 4
        rows = [(r["draft"], r["accept_length"]) for r in result["runs"] if r["draft"].startswith(("chain", "eagle"))]
        assert rows, "the run has chain and EAGLE rows"
        if varied and any(a < drafts.parse(d).forwards + 1 for d, a in rows):
            return
        uninformative.append((seed, "loops" if not varied else "every chain / EAGLE draft accepted whole", rows))
    pytest.fail(f"five fresh seeds, none with varied tokens and a rejected chain or EAGLE draft: {uninformative}")


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                    reason="the triton path on a CPU needs TRITON_INTERPRET=1 before Triton is imported (conftest "
                           "sets it on machines without a CUDA GPU)")
def test_a_whole_run_verified_by_the_triton_twin_in_the_interpreter(monkeypatch):
    seed = fresh_seed()
    monkeypatch.setattr(corpus, "text", lambda max_bytes=8 << 20: ALPHABET)
    spec = run.GenerateSpec(**SMALL_RUN | dict(contexts=(24,), new_tokens=8, drafts=("eagle-2x2-4",),
                                               paths=("triton", "reference"), pools=("fp8",), seed=seed))
    result, tokens = _generate_spying(monkeypatch, spec)
    _check_runs(spec, result, tokens, f"triton, alphabet text, seed {seed}")
    triton_row = next(r for r in result["runs"] if r["path"] == "triton")
    assert triton_row["status_flags"] and not any(triton_row["status_flags"].values())


# ---- 8. kdtree-lab generate ----------------------------------------------------------------------------------------

def _outcome(argv, capsys):
    return cli_outcome(["generate", *argv], capsys)


@pytest.fixture
def no_work(monkeypatch):
    """A refused command must not train a model or start the runs."""
    def boom(*a, **k):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(corpus, "train", boom)
    monkeypatch.setattr(run, "generate", boom)


@pytest.mark.parametrize("argv,code,named", [
    (["--drafts", "chain-99"], 2, "chain-99"),
    (["--drafts", "chain-4,eagle-4x3-99"], 2, "eagle-4x3-99"),
    (["--drafts", "tree-4"], 2, "tree-4"),
    (["--paths", "nowhere"], 2, "nowhere"),
    (["--pools", "fp16"], 2, "fp16"),
    (["--paths", "ours"], 3, "ours"),
    (["--paths", "reference,hook"], 3, "hook"),
    (["--pool-tokens", "10"], 3, "pool_tokens"),
    (["--max-draft", "8", "--drafts", "ddtree-32-8"], 3, "ddtree-32-8"),
    (["--max-draft", "4", "--drafts", "chain-2,chain-4"], 3, "chain-4"),
])
def test_cli_refusals_are_one_line_before_any_work(argv, code, named, capsys, no_work):
    got, out, err = _outcome(argv, capsys)
    line = _one_line(err)
    assert got == code, (got, err)
    assert line.startswith("kdtree-lab generate: ") and named in line, line
    assert out == ""


def test_cli_names_equal_the_packages():
    assert cli_generate.PATHS == attend.PATHS
    assert cli_generate.POOLS == run.POOLS
    cpu = cli_generate.PROFILES["cpu"]
    assert set(cpu["paths"]) <= {"triton", "reference"} and cpu["device"] == "cpu"
    run.plan(run.GenerateSpec(**cpu))  # the default CPU profile passes its own checks


def test_cli_tiny_run_exits_0_with_json(capsys):
    argv = ["--layers", "2", "--train-steps", "5", "--contexts", "32", "--prompts", "1", "--new-tokens", "8",
            "--drafts", "chain-2", "--paths", "reference", "--pools", "bf16", "--json"]
    code, out, err = _outcome(argv, capsys)
    assert code == 0, err[-2000:]
    result = json.loads(out)
    assert result["spec"]["hidden"] == cli_generate.PROFILES["cpu"]["hidden"] and result["spec"]["train_steps"] == 5
    assert [r["draft"] for r in result["runs"]] == ["none (greedy)", "chain-2"]
    for r in result["runs"]:
        assert r["check"]["compared"] == 8 and r["check"]["unexplained"] == 0, r["check"]
        assert (r["context"], r["pool"], r["prompts"]) == (32, "bf16", 1)
    assert result["runs"][1]["path"] == "reference" and result["runs"][1]["accept_length"] >= 1


def test_committed_results_pair_ours_with_sglang_and_keep_their_margins():
    from kdtree_lab.generate import results

    runs = results.committed()
    assert results.totals(runs)["unexplained"] == 0 and all(r["check"]["compared"] >= 2048 for r in runs)
    rows = results.speed_rows(results.committed(only=results.TIMED))
    assert {r["context"] for r in rows} >= {1024, 32768, 131072}
    assert all(r["ours / SGLang"] >= 1 for r in rows if r["context"] >= 32768)  # issue 50's end-to-end bar
    assert results.beyond_greedy_bound(runs) == []  # every mismatch within greedy decoding's own bound too
    counts = results.margin_counts(runs)
    assert sum(counts["mismatched"]) <= sum(counts["all"]) and len(counts["all"]) == len(counts["edges"]) - 1


def test_the_step_model_beside_the_generation_runs():
    from kdtree_lab.speculate import generation

    rows = generation.rows()
    assert {r["path"] for r in rows} == {"ours", "sglang"} and len(rows) >= 30
    # ours: the verify attention the model predicts leaves only the forward's other kernels (well under 1 ms)
    assert all(0 < r["verify ms, measured"] - r["attention ms, model"] < 1.0 for r in rows
               if r["path"] == "ours" and r["H"] == 8)
    assert all(0.6 < r["model / measured"] < 1.2 for r in rows)


def test_ctrl_c_mid_run_prints_what_ran_and_exits_130(monkeypatch, capsys):
    from kdtree_lab.cli.main import main
    from kdtree_lab.generate import loop

    real = loop.Engine.spec_step
    calls = {"n": 0}

    def interrupted(self, *a, **k):
        calls["n"] += 1
        if calls["n"] > 1:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(loop.Engine, "spec_step", interrupted)
    code = main(["generate", "--layers", "2", "--train-steps", "3", "--contexts", "24", "--prompts", "1",
                 "--new-tokens", "8", "--drafts", "chain-2", "--pools", "bf16"])
    out = capsys.readouterr().out
    assert code == 130 and "interrupted (Ctrl-C)" in out and "none (greedy)" in out  # the greedy run finished


def test_what_the_first_review_found_is_refused_or_counted_once():
    for name in ("eagle-300x1-2", "ddtree-300-1"):  # more tokens than a 256-token vocabulary holds
        with pytest.raises(ValueError, match=name):
            drafts.parse(name)
    p = pool.LatentPool(1, 4)
    a = p.alloc(2)
    p.free(a[:1])
    with pytest.raises(ValueError, match="already free"):
        p.free(a[:1])
    assert sorted(p.alloc(3)) == [1, 3, 4]  # slot 2 still in use, never handed out twice
    ref = np.zeros((1, 4))
    ref[0, 0] = 5.0
    path = ref.copy()
    path[0, 1] = 9.0  # the row's own argmax is 1, the token emitted 2, the reference's 0: one bad token, counted once
    tc = check.compare([[2]], [path], [ref], bound=0.1)
    assert tc.self_mismatches == 1 and tc.unexplained == 1 and tc.bound == 0.1


def test_a_cpu_run_names_the_gpu_paths_it_leaves_out():
    cpu = run.GenerateSpec(device="cpu", paths=("reference", "triton"))
    [(what, why)] = run.gpu_paths_left_out(cpu)
    assert "ours, hook, sglang" in what and "device is cpu" in why and "reference, triton" in why
    assert run.gpu_paths_left_out(run.GenerateSpec(device="cuda", paths=("ours",))) == []
