"""The weights one GPU holds when SGLang 0.5.23 serves an MLA MoE model (the DeepSeek-V3 architecture: DeepSeek-V3/R1,
Kimi K2.x, DeepSeek-V2-Lite) at ``--tp T``, computed from the model's architecture and its checkpoint's quantisation
under SGLang's own sharding rules, and what loading them costs on top.

Each tensor is a :class:`WeightTensor`: the module, its shape on one rank, dtype, how it is sharded and the rule of
``data/contracts/sglang-0.5.23-weight-sharding.yaml`` that says so (file and lines of the wheel). Replicated on
every rank: the attention down-projection (``fused_qkv_a_proj_with_mqa``), the MoE router and its bias, the norms,
the rotary cache; split over the ranks: q_b / kv_b / o, the dense and shared MLPs, the routed experts (all of them on
every rank, intermediate dim / T) and the vocabulary (embed_tokens, lm_head). ``w_kc`` / ``w_vc`` are a second copy of
kv_b's shard. What loading adds: the caching allocator's segments (:mod:`caching_allocator`: the tensors are
allocated in the order SGLang constructs them, the Marlin path's g_idx tensors freed after load), and with
speculative decoding the draft model, whose weights are counted inside the fraction (they are loaded before the
target's pool is sized; its own embed / lm_head are freed only after). Not modelled: the CUDA context's growth as
kernels load during weight loading (docs/memory.md compares the total with the public "Load weight end" figures).
Bytes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .caching_allocator import CachingAllocator
from .presets import ModelPreset, models

DTYPE_BYTES = {"bf16": 2, "fp8": 1, "int32": 4, "fp32": 4}
MOE_RUNNERS = ("marlin", "triton")  # how SGLang 0.5.23 holds W4A16 routed experts (rule w4a16_runner)


@dataclass(frozen=True)
class WeightTensor:
    """One tensor on one rank. ``when``: "kept" (allocated at construction), "post-load" (allocated after the load,
    w_kc / w_vc), "freed" (allocated at construction, freed after the load)."""

    module: str
    shape: tuple[int, ...]
    dtype: str
    sharding: str
    rule: str
    when: str = "kept"

    @property
    def bytes(self) -> int:
        n = DTYPE_BYTES[self.dtype]
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class WeightTerm:
    """The tensors of one module over the layers it repeats in (what the budget shows)."""

    module: str
    shape: tuple[int, ...]
    dtype: str
    sharding: str
    rule: str
    instances: int
    bytes: int  # all instances

    def row(self) -> dict:
        return {"module": self.module, "shape (one rank)": "x".join(map(str, self.shape)), "dtype": self.dtype,
                "sharding": self.sharding, "instances": self.instances, "MiB": round(self.bytes / 2**20, 1),
                "rule": self.rule}


@dataclass(frozen=True)
class LoadedWeights:
    """What one rank holds after the load, in bytes: the target's tensors, the draft's (0 without speculative
    decoding), and the caching allocator's segments over both less what the tensors hold."""

    target_terms: tuple[WeightTerm, ...]
    draft_terms: tuple[WeightTerm, ...]
    target_bytes: int
    draft_bytes: int
    allocator_bytes: int  # over both models
    target_allocator_bytes: int  # after the target's load (what its "Load weight end ... mem usage" includes)
    moe_runner: str
    vision: bool

    @property
    def total_bytes(self) -> int:
        return self.target_bytes + self.draft_bytes + self.allocator_bytes

    @property
    def target_loaded_bytes(self) -> int:
        """The target's weights as SGLang's first "Load weight end ... mem usage" counts them."""
        return self.target_bytes + self.target_allocator_bytes

    @property
    def draft_loaded_bytes(self) -> int:
        """The draft's, as its own "Load weight end" line counts them (0 without a draft)."""
        return self.total_bytes - self.target_loaded_bytes

    def rows(self) -> list[dict]:
        out = [t.row() | {"model": "target"} for t in self.target_terms]
        blank = {"shape (one rank)": "", "dtype": "", "sharding": "", "instances": 1, "rule": "torch_caching_allocator"}
        out.append({"module": "caching allocator segments beyond the tensors", **blank,
                    "MiB": round(self.target_allocator_bytes / 2**20, 1), "model": "target"})
        if self.draft_terms:
            out += [t.row() | {"model": "draft"} for t in self.draft_terms]
            out.append({"module": "caching allocator segments beyond the tensors", **blank, "model": "draft",
                        "MiB": round((self.allocator_bytes - self.target_allocator_bytes) / 2**20, 1)})
        return out


class WeightsInputError(ValueError):
    """A model / quantisation / TP the weights cannot be computed for; the message names it."""


def _vocab_rows(vocab: int, tp: int) -> int:
    """Rows of embed_tokens / lm_head on one rank: the vocabulary padded to 64, to 64 x T when 64 does not make it
    divide (rule vocab_parallel)."""
    pad = 64
    padded = -(-vocab // pad) * pad
    if padded % tp:
        pad *= tp
        padded = -(-vocab // pad) * pad
    return padded // tp


class _Layout:
    """How one checkpoint stores a linear layer: the tensors of a [out, in] weight (per rank) with its scales."""

    def __init__(self, ck: dict) -> None:
        self.scheme = ck["scheme"]
        self.quantized = set(ck.get("quantized", ()))
        self.block = ck.get("block", 128)
        self.group = ck.get("group_size", 32)

    def linear(self, module: str, out: int, inp: int, part: str, sharding: str, rule: str) -> list[WeightTensor]:
        if part not in self.quantized or self.scheme in ("bf16", "w4a16"):  # W4A16 quantises only routed experts
            return [WeightTensor(module, (out, inp), "bf16", sharding, rule)]
        if self.scheme == "fp8-block":
            b = self.block
            return [WeightTensor(module, (out, inp), "fp8", sharding, rule),
                    WeightTensor(module + ".weight_scale_inv", (-(-out // b), -(-inp // b)), "fp32", sharding,
                                 "fp8_block")]
        if self.scheme == "fp8-tensor":
            return [WeightTensor(module, (out, inp), "fp8", sharding, rule),
                    WeightTensor(module + ".weight_scale", (1,), "fp32", sharding, rule)]
        raise WeightsInputError(f"scheme: expected bf16, w4a16, fp8-block or fp8-tensor, found {self.scheme!r}")

    def experts(self, e: int, hidden: int, inter: int, runner: str) -> list[WeightTensor]:
        """The routed experts of one MoE layer on one rank: all ``e`` of them, intermediate ``inter`` (already / T)."""
        sh, rule = "experts: all on every rank, intermediate /T", "routed_experts"
        if "routed_experts" not in self.quantized or self.scheme == "bf16":
            return [WeightTensor("mlp.experts.w13_weight", (e, 2 * inter, hidden), "bf16", sh, rule),
                    WeightTensor("mlp.experts.w2_weight", (e, hidden, inter), "bf16", sh, rule)]
        if self.scheme == "w4a16":
            g, freed = self.group, "freed" if runner == "marlin" else "kept"
            return [WeightTensor("mlp.experts.w13_weight_packed", (e, hidden // 8, 2 * inter), "int32", sh, "w4a16_moe"),
                    WeightTensor("mlp.experts.w2_weight_packed", (e, inter // 8, hidden), "int32", sh, "w4a16_moe"),
                    WeightTensor("mlp.experts.w13_weight_scale", (e, hidden // g, 2 * inter), "bf16", sh, "w4a16_moe"),
                    WeightTensor("mlp.experts.w2_weight_scale", (e, inter // g, hidden), "bf16", sh, "w4a16_moe"),
                    WeightTensor("mlp.experts.w2_weight_shape", (e, 2), "bf16", sh, "w4a16_moe"),
                    WeightTensor("mlp.experts.w13_weight_shape", (e, 2), "bf16", sh, "w4a16_moe"),
                    WeightTensor("mlp.experts.w13_weight_g_idx", (e, hidden), "int32", sh, "w4a16_moe", freed),
                    WeightTensor("mlp.experts.w2_weight_g_idx", (e, inter), "int32", sh, "w4a16_moe", freed),
                    WeightTensor("mlp.experts.w13_g_idx_sort_indices", (e, hidden), "int32", sh, "w4a16_moe", freed),
                    WeightTensor("mlp.experts.w2_g_idx_sort_indices", (e, inter), "int32", sh, "w4a16_moe", freed)]
        if self.scheme == "fp8-block":
            b = self.block
            return [WeightTensor("mlp.experts.w13_weight", (e, 2 * inter, hidden), "fp8", sh, rule),
                    WeightTensor("mlp.experts.w2_weight", (e, hidden, inter), "fp8", sh, rule),
                    WeightTensor("mlp.experts.w13_weight_scale_inv", (e, 2 * -(-inter // b), -(-hidden // b)), "fp32",
                                 sh, "fp8_block"),
                    WeightTensor("mlp.experts.w2_weight_scale_inv", (e, -(-hidden // b), -(-inter // b)), "fp32", sh,
                                 "fp8_block")]
        if self.scheme == "fp8-tensor":
            return [WeightTensor("mlp.experts.w13_weight", (e, 2 * inter, hidden), "fp8", sh, rule),
                    WeightTensor("mlp.experts.w2_weight", (e, hidden, inter), "fp8", sh, rule),
                    WeightTensor("mlp.experts.w13_weight_scale", (e, 2), "fp32", sh, rule),
                    WeightTensor("mlp.experts.w2_weight_scale", (e,), "fp32", sh, rule)]
        raise WeightsInputError(f"scheme: expected bf16, w4a16, fp8-block or fp8-tensor, found {self.scheme!r}")


def _attention(m: ModelPreset, lay: _Layout, tp: int, hidden_in: int | None = None) -> tuple[list, list]:
    """One MLA attention block on one rank: (tensors built with the layer, w_kc / w_vc allocated after the load)."""
    a = m.architecture
    h, q_lora, rank, rope = m.heads // tp, a["q_lora_rank"], m.kv_lora_rank, m.qk_rope_head_dim
    nope, v, hid = a["qk_nope_head_dim"], a["v_head_dim"], a["hidden_size"]
    rep, col, row = "replicated", "column /T", "row /T"
    out: list[WeightTensor] = []
    if q_lora:
        out += lay.linear("self_attn.fused_qkv_a_proj_with_mqa", q_lora + rank + rope, hidden_in or hid, "attention",
                          rep, "replicated_a_proj")
        out.append(WeightTensor("self_attn.q_a_layernorm", (q_lora,), "bf16", rep, "norms"))
        out += lay.linear("self_attn.q_b_proj", h * (nope + rope), q_lora, "attention", col, "column_q")
    else:
        out += lay.linear("self_attn.q_proj", h * (nope + rope), hid, "attention", col, "column_q")
        out += lay.linear("self_attn.kv_a_proj_with_mqa", rank + rope, hid, "attention", rep, "replicated_a_proj")
    out += lay.linear("self_attn.kv_b_proj", h * (nope + v), rank, "attention", col, "column_kv_b")
    out += lay.linear("self_attn.o_proj", hid, h * v, "attention", row, "row_o")
    out.append(WeightTensor("self_attn.kv_a_layernorm", (rank,), "bf16", rep, "norms"))
    post = [WeightTensor("self_attn.w_kc", (h, nope, rank), "bf16", "column /T (a copy of kv_b)", "absorbed_copies",
                         "post-load"),
            WeightTensor("self_attn.w_vc", (h, rank, v), "bf16", "column /T (a copy of kv_b)", "absorbed_copies",
                         "post-load")]
    return out, post


def _mlp(module: str, hidden: int, inter: int, tp: int, lay: _Layout, part: str) -> list[WeightTensor]:
    return (lay.linear(f"{module}.gate_up_proj", 2 * (inter // tp), hidden, part, "column /T", "dense_mlp")
            + lay.linear(f"{module}.down_proj", hidden, inter // tp, part, "row /T", "dense_mlp"))


def _moe(m: ModelPreset, lay: _Layout, tp: int, runner: str) -> list[WeightTensor]:
    a = m.architecture
    e, hid, inter = a["n_routed_experts"], a["hidden_size"], a["moe_intermediate_size"]
    out = [WeightTensor("mlp.gate.weight", (e, hid), "bf16", "replicated", "router"),
           WeightTensor("mlp.gate.e_score_correction_bias", (e,), "fp32", "replicated", "router")]
    out += lay.experts(e, hid, inter // tp, runner)
    if a["n_shared_experts"]:
        out += _mlp("mlp.shared_experts", hid, inter * a["n_shared_experts"], tp, lay, "shared_experts")
    return out


def _decoder_layer(m: ModelPreset, lay: _Layout, tp: int, dense: bool, runner: str) -> tuple[list, list]:
    attn, post = _attention(m, lay, tp)
    a = m.architecture
    mlp = (_mlp("mlp", a["hidden_size"], a["intermediate_size"], tp, lay, "dense_mlp") if dense
           else _moe(m, lay, tp, runner))
    norms = [WeightTensor(n, (a["hidden_size"],), "bf16", "replicated", "norms")
             for n in ("input_layernorm", "post_attention_layernorm")]
    return attn + mlp + norms, post


def _vocab(module: str, m: ModelPreset, tp: int, vocab: int | None = None) -> WeightTensor:
    a = m.architecture
    return WeightTensor(module, (_vocab_rows(vocab or a["vocab_size"], tp), a["hidden_size"]), "bf16", "vocab /T",
                        "vocab_parallel")


def _vision(m: ModelPreset, tp: int) -> list[WeightTensor]:
    """The MoonViT tower and projector on one rank (rules vision_tower, vision_mlp_replicated)."""
    v, text = m.vision, m.architecture["hidden_size"]
    d, mlp, heads, p, merged = v["hidden_size"], v["intermediate_size"], v["heads"], v["patch_size"], \
        v["hidden_size"] * v["merge"] ** 2
    if heads % tp:
        raise WeightsInputError(f"tp: expected a divisor of the vision tower's {heads} heads, found {tp}")
    rep, col = "replicated", "attn-TP /T"
    out = [WeightTensor("vision_tower.patch_embed.proj", (d, 3, p, p), "bf16", rep, "vision_tower"),
           WeightTensor("vision_tower.patch_embed.proj.bias", (d,), "bf16", rep, "vision_tower"),
           WeightTensor("vision_tower.patch_embed.pos_emb", (v["pos_emb"], v["pos_emb"], d), "bf16", rep,
                        "vision_tower")]
    for _ in range(v["layers"]):
        out += [WeightTensor("vision_tower.encoder.norm0+norm1", (4, d), "bf16", rep, "vision_tower"),
                WeightTensor("vision_tower.encoder.attn.qkv_proj", (3 * d // tp, d), "bf16", col, "vision_tower"),
                WeightTensor("vision_tower.encoder.attn.qkv_proj.bias", (3 * d // tp,), "bf16", col, "vision_tower"),
                WeightTensor("vision_tower.encoder.attn.proj", (d, d // tp), "bf16", "row /T", "vision_tower"),
                WeightTensor("vision_tower.encoder.attn.proj.bias", (d,), "bf16", rep, "vision_tower"),
                WeightTensor("vision_tower.encoder.mlp.fc0", (mlp, d), "bf16", rep, "vision_mlp_replicated"),
                WeightTensor("vision_tower.encoder.mlp.fc0.bias", (mlp,), "bf16", rep, "vision_mlp_replicated"),
                WeightTensor("vision_tower.encoder.mlp.fc1", (d, mlp), "bf16", rep, "vision_mlp_replicated"),
                WeightTensor("vision_tower.encoder.mlp.fc1.bias", (d,), "bf16", rep, "vision_mlp_replicated")]
    out += [WeightTensor("vision_tower.encoder.final_layernorm", (2, d), "bf16", rep, "vision_tower"),
            WeightTensor("mm_projector.pre_norm", (2, d), "bf16", rep, "vision_tower"),
            WeightTensor("mm_projector.linear_1", (merged, merged), "bf16", rep, "vision_tower"),
            WeightTensor("mm_projector.linear_1.bias", (merged,), "bf16", rep, "vision_tower"),
            WeightTensor("mm_projector.linear_2", (text, merged), "bf16", rep, "vision_tower"),
            WeightTensor("mm_projector.linear_2.bias", (text,), "bf16", rep, "vision_tower")]
    return out


def _rope(m: ModelPreset, ck: dict) -> WeightTensor:
    r = m.rope
    factor = ck.get("rope_factor", r["factor"])  # a checkpoint whose YaRN factor differs from the preset's
    return WeightTensor("rotary_emb.cos_sin_cache", (r["original_max_position_embeddings"] * factor,
                                                     m.qk_rope_head_dim), "fp32", "replicated, one per process",
                        "rope_cache")


def target_tensors(m: ModelPreset, quant: str, tp: int, runner: str, vision: bool | None = None) -> list[WeightTensor]:
    """The target's tensors on one rank in the order SGLang allocates them: the vision tower (K2.5/K2.6; ``vision``
    overrides the checkpoint's), embed_tokens, each decoder layer (the rotary cache with the first), the final norm,
    lm_head; then the post-load copies."""
    ck = m.checkpoints[quant]
    lay = _Layout(ck)
    a = m.architecture
    out: list[WeightTensor] = _vision(m, tp) if (ck.get("vision") if vision is None else vision) else []
    out.append(_vocab("embed_tokens", m, tp))
    post: list[WeightTensor] = []
    for i in range(m.layers):
        layer, copies = _decoder_layer(m, lay, tp, dense=i < a["first_k_dense_replace"], runner=runner)
        out += layer + ([_rope(m, ck)] if i == 0 else [])
        post += copies
    out += [WeightTensor("norm", (a["hidden_size"],), "bf16", "replicated", "norms"), _vocab("lm_head", m, tp)]
    return out + post


def draft_tensors(m: ModelPreset, quant: str, tp: int, runner: str) -> list[WeightTensor]:
    """The draft model SGLang 0.5.23 loads for EAGLE / EAGLE3 on one rank (rule draft_counted): DeepSeek-V3's MTP
    layer (NextN, in the checkpoint's quantisation) or Kimi's EAGLE3 MLA draft (bf16); [] when the preset has none."""
    kind = m.draft["kind"]
    a = m.architecture
    hid = a["hidden_size"]
    if kind == "none":
        return []
    if kind == "nextn":
        lay = _Layout(m.checkpoints[quant])
        layer, post = _decoder_layer(m, lay, tp, dense=False, runner=runner)
        return ([_vocab("draft.embed_tokens", m, tp)]
                + [WeightTensor(f"draft.{n}", (hid,), "bf16", "replicated", "norms") for n in ("enorm", "hnorm")]
                + [WeightTensor("draft.eh_proj", (hid, 2 * hid), "bf16", "replicated", "nextn_draft")]
                + [WeightTensor("draft." + t.module, t.shape, t.dtype, t.sharding, t.rule, t.when) for t in layer]
                + [WeightTensor("draft.shared_head.norm", (hid,), "bf16", "replicated", "nextn_draft"),
                   _vocab("draft.lm_head", m, tp)]
                + [WeightTensor("draft." + t.module, t.shape, t.dtype, t.sharding, t.rule, t.when) for t in post])
    if kind == "eagle3-mla":
        d, bf16 = m.draft, _Layout({"scheme": "bf16"})
        attn, post = _attention(m, bf16, tp)
        # the layer builds a hid-wide fused_qkv_a, then replaces it by a 2 x hid one (the first is freed)
        first, *rest = attn
        wide = WeightTensor(first.module, (first.shape[0], 2 * hid), "bf16", "replicated", "eagle3_mla_draft")
        freed = WeightTensor(first.module, first.shape, "bf16", "replicated", "eagle3_mla_draft", "freed")
        out = [_vocab("draft.embed_tokens", m, tp),
               WeightTensor("draft.fc", (hid // tp, d["aux_hidden_states"] * hid), "bf16", "column /T",
                            "eagle3_mla_draft")]
        out += [WeightTensor("draft." + t.module, t.shape, t.dtype, t.sharding, t.rule, t.when)
                for t in [freed] + rest + [wide] + _mlp("mlp", hid, d["intermediate_size"], tp, bf16, "dense_mlp")]
        out += [WeightTensor(f"draft.{n}", (hid,), "bf16", "replicated", "norms")
                for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm", "norm")]
        out.append(_vocab("draft.lm_head", m, tp, d["draft_vocab_size"]))
        return out + [WeightTensor("draft." + t.module, t.shape, t.dtype, t.sharding, t.rule, t.when) for t in post]
    raise WeightsInputError(f"draft kind: expected none, nextn or eagle3-mla, found {kind!r}")


def _terms(tensors: list[WeightTensor]) -> tuple[WeightTerm, ...]:
    grouped: dict[tuple, list[WeightTensor]] = {}
    for t in tensors:
        if t.when != "freed":
            grouped.setdefault((t.module, t.shape, t.dtype, t.sharding, t.rule), []).append(t)
    return tuple(WeightTerm(k[0], k[1], k[2], k[3], k[4], len(v), sum(t.bytes for t in v))
                 for k, v in grouped.items())


def _held(tensors: list[WeightTensor]) -> int:
    return sum(t.bytes for t in tensors if t.when != "freed")


def moe_runner_for(quant: str, compute_capability: int) -> str:
    """The runner SGLang 0.5.23 picks for W4A16 routed experts with the auto backend: Triton on SM100 (B200),
    Marlin elsewhere on NVIDIA (rule w4a16_runner); ROCm's Triton path is not a preset GPU."""
    return "triton" if quant == "int4" and compute_capability in (100, 103) else "marlin"


@lru_cache(maxsize=None)
def loaded(model: str, quant: str, tp: int, moe_runner: str = "marlin", draft: bool = False,
           vision: bool | None = None) -> LoadedWeights:
    """What one of ``tp`` ranks holds after SGLang 0.5.23 loads ``model`` (weights ``quant``), with the draft model
    when ``draft``: the tensors of both and the caching allocator's segments over them, the frees and post-load
    copies in SGLang's order. ``vision`` overrides whether the checkpoint has the vision tower (K2-Thinking: no)."""
    ms = models()
    if model not in ms:
        raise WeightsInputError(f"model: expected one of {', '.join(sorted(ms))}, found {model!r}")
    m = ms[model]
    if quant not in m.checkpoints:
        raise WeightsInputError(f"quant: expected one of {', '.join(sorted(m.checkpoints))} (the checkpoints "
                                f"{model} has), found {quant!r}")
    if moe_runner not in MOE_RUNNERS:
        raise WeightsInputError(f"moe_runner: expected one of {', '.join(MOE_RUNNERS)}, found {moe_runner!r}")
    if tp < 1 or m.heads % tp:
        raise WeightsInputError(f"tp: expected a divisor of the model's {m.heads} heads, found {tp}")
    target = target_tensors(m, quant, tp, moe_runner, vision)
    extra = draft_tensors(m, quant, tp, moe_runner) if draft else []
    alloc = CachingAllocator()
    reserved = []
    for phase in (target, extra):  # construction, then the post-load copies and frees, per model
        built = [(t, alloc.malloc(t.bytes)) for t in phase if t.when != "post-load"]
        for t in phase:
            if t.when == "post-load":
                alloc.malloc(t.bytes)
        for t, h in built:
            if t.when == "freed":
                alloc.free(h)
        alloc.empty_cache()  # SGLang reads the free memory after each model's load
        reserved.append(alloc.reserved)
    has_vision = bool(m.checkpoints[quant].get("vision")) if vision is None else vision
    return LoadedWeights(_terms(target), _terms(extra), _held(target), _held(extra),
                         reserved[1] - _held(target) - _held(extra), reserved[0] - _held(target), moe_runner,
                         has_vision)
