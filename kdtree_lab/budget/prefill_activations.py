"""The activation peak of one chunked-prefill step in SGLang 0.5.23, from the tensors SGLang's own prefill path
allocates (data/contracts/sglang-0.5.23-prefill-activations.yaml), on one TP rank of an MLA MoE model.

A step runs the target's layers over the chunk's ``T`` tokens (the first chunk of a prompt on the MHA path, later
chunks on the absorbed MLA path over the latent pool), its logits (one row per request) and, with speculative
decoding, the draft's extend over the same tokens. Each tensor is live over a range of steps of its block; the peak
of a phase is the largest sum of live tensors over its steps, and the activation peak is the largest phase peak.
SGLang's default ``mem_fraction_static`` instead reserves 1.5 MiB per chunk token for all of this
(arg_groups/memory_hook.py). docs/memory.md has the reasoning; scripts/prefill_activation_peak.py measures the
same phases on a GPU and data/results/h200/*-prefill-activations/ holds the result the budget reads.

Bytes unless a name says otherwise; token counts are tokens.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import yaml

from ..core.paths import DATA, RESULTS
from .presets import models

CONTRACT = DATA / "contracts" / "sglang-0.5.23-prefill-activations.yaml"
MEASURED_GLOB = "*-prefill-activations/prefill-activations.json"  # under data/results/h200/
DTYPE_BYTES = {"bf16": 2, "fp32": 4, "int32": 4, "int64": 8, "uint8": 1}
# torch's cuBLAS workspace on compute capability >= 9.0 (CUBLAS_WORKSPACE_CONFIG default ":4096:8", 8 x 4 MiB);
# the measurement records what the GPU really got
CUBLAS_WORKSPACE = 32 << 20
TRITON_MOE_BLOCK_M = 64  # fused_moe_triton_config.get_default_config's BLOCK_SIZE_M for large M
MARLIN_BLOCKS = (8, 16, 32, 48, 64)  # fused_marlin_moe's candidate block rows
# hidden states SGLang captures for the draft: EAGLE3's default layers_to_capture [2, L // 2, L - 3]
# (DeepseekV2ForCausalLM.set_eagle3_layers_to_capture); DFLASH one per draft layer (an estimate: the draft's
# num_hidden_layers is not in the presets); EAGLE hands over the last layer's output only
CAPTURED_LAYERS = {"EAGLE": 0, "EAGLE3": 3, "DFLASH": 5}


class ActivationInputError(ValueError):
    """An input the activation model cannot size; the message names it."""


@dataclass(frozen=True)
class Architecture:
    """The config.json numbers a prefill step's tensors are sized by (one model preset)."""

    name: str
    layers: int
    heads: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    hidden_size: int
    q_lora_rank: int
    qk_nope_head_dim: int
    v_head_dim: int
    first_k_dense_replace: int
    intermediate_size: int
    n_routed_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    n_shared_experts: int
    vocab_size: int


def architecture(model: str) -> Architecture:
    """The preset's architecture (data/presets/models.yaml: the attention numbers and ``architecture``)."""
    presets = models()
    if model not in presets:
        raise ActivationInputError(f"model: unknown preset {model!r}; known: {sorted(presets)}")
    p = presets[model]
    return Architecture(name=model, layers=p.layers, heads=p.heads, kv_lora_rank=p.kv_lora_rank,
                        qk_rope_head_dim=p.qk_rope_head_dim, **p.architecture)


@lru_cache(maxsize=1)
def contract() -> dict:
    return yaml.safe_load(CONTRACT.read_text())


def moe_runner(quant: str) -> str:
    """The routed experts' runner for a weight quantisation (marlin for int4 W4A16, triton for fp8 / bf16)."""
    runners = contract()["moe_runner"]
    if quant not in runners:
        raise ActivationInputError(f"quant: expected one of {sorted(runners)}, got {quant!r}")
    return runners[quant]["runner"]


def fuses_shared_expert(arch: Architecture, quant: str) -> bool:
    """SGLang 0.5.23 fuses the shared expert into the routed ones (top-k + 1) for DeepSeek-V3-shaped checkpoints
    (256 routed experts, one shared) that are not W4A16 (DeepseekV2ForCausalLM.shared_experts_fusion_disable_reason;
    Kimi K2's 384 experts fuse only from a Quark MXFP4 checkpoint, not a preset here)."""
    return arch.n_routed_experts == 256 and arch.n_shared_experts == 1 and quant != "int4"


def marlin_block_m(tokens: int, topk: int, experts: int) -> int:
    """fused_marlin_moe's block rows: the first of 8, 16, 32, 48, 64 with tokens x topk / experts / rows < 0.9,
    else 64."""
    for block in MARLIN_BLOCKS:
        if tokens * topk / experts / block < 0.9:
            return block
    return MARLIN_BLOCKS[-1]


def symbols(arch: Architecture, *, tp: int, tokens: int, requests: int, prefix: int, quant: str,
            captured_layers: int, sms: int, cublas_bytes: int = CUBLAS_WORKSPACE) -> dict[str, int]:
    """The contract's symbols for one deployment (see the contract's ``symbols`` for their meaning)."""
    for name, value in (("tp", tp), ("tokens", tokens), ("requests", requests), ("sms", sms)):
        if value < 1:
            raise ActivationInputError(f"{name}: must be >= 1, got {value}")
    if prefix < 0 or captured_layers < 0:
        raise ActivationInputError(f"prefix / captured_layers: must be >= 0, got {prefix} / {captured_layers}")
    if arch.heads % tp:
        raise ActivationInputError(f"tp: {arch.heads} heads do not divide over tp={tp}")
    fused = fuses_shared_expert(arch, quant)
    experts = arch.n_routed_experts + int(fused)
    topk = arch.num_experts_per_tok + int(fused)
    vocab_shard = -(-(-(-arch.vocab_size // 64) * 64) // tp)
    return {"T": tokens, "R": requests, "P": prefix, "D": arch.hidden_size, "H": arch.heads // tp,
            "Lq": arch.q_lora_rank, "C": arch.kv_lora_rank, "Rd": arch.qk_rope_head_dim, "Nd": arch.qk_nope_head_dim,
            "Vd": arch.v_head_dim, "Er": arch.n_routed_experts, "E": experts, "K": topk,
            "I": arch.moe_intermediate_size // tp,
            "Is": 0 if fused else arch.n_shared_experts * arch.moe_intermediate_size // tp,
            "Id": arch.intermediate_size // tp, "V": arch.vocab_size, "Vt": vocab_shard, "tp": tp,
            "A": captured_layers, "S": sms, "BM": marlin_block_m(tokens, topk, experts), "BMT": TRITON_MOE_BLOCK_M,
            "FP8": int(quant == "fp8"), "CUBLAS": cublas_bytes}


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_CMPOPS = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Eq: operator.eq}
_FUNCS = {"max": max, "min": min, "cdiv": lambda a, b: -(-a // b), "pad4": lambda a: -(-a // 4) * 4}


def evaluate(expr, env: dict[str, int]) -> int:
    """An integer shape expression of the contract (+ - * //, comparisons, and / or / not, ``x if c else y``,
    max / min / cdiv / pad4) over ``env``; anything else is refused."""
    if isinstance(expr, int):
        return expr

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ActivationInputError(f"contract: unknown symbol {node.id!r} in {expr!r}")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
            return int(_CMPOPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0])))
        if isinstance(node, ast.BoolOp):
            values = [ev(v) for v in node.values]
            return int(all(values) if isinstance(node.op, ast.And) else any(values))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return int(not ev(node.operand))
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))
        raise ActivationInputError(f"contract: unsupported expression {expr!r}")

    return int(ev(ast.parse(str(expr), mode="eval")))


@dataclass(frozen=True)
class LiveTensor:
    """One tensor of a phase: its shape (elements), dtype, bytes and the steps it is live over."""

    block: str
    name: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    source: str


@dataclass(frozen=True)
class PhasePeak:
    """A phase's peak: the step it is reached at and the tensors live there (largest first)."""

    phase: str
    bytes: int
    step: str
    live: tuple[LiveTensor, ...]


@dataclass(frozen=True)
class ActivationPeak:
    """The activation peak of one chunked-prefill step and every phase's own peak."""

    bytes: int
    phase: str  # the phase that sets it
    phases: tuple[PhasePeak, ...]
    moe_runner: str
    fused_shared_expert: bool
    inputs: dict = field(default_factory=dict)

    def rows(self) -> list[dict]:
        """One row per phase: its peak (MiB), the step, and the largest tensor live there."""
        return [{"phase": p.phase, "MiB": round(p.bytes / (1 << 20)), "at step": p.step,
                 "largest tensor": f"{p.live[0].name} ({p.live[0].bytes / (1 << 20):.1f} MiB)" if p.live else ""}
                for p in self.phases]


def _tensors(block: str, spec: dict, env: dict[str, int]) -> list[tuple[dict, LiveTensor]]:
    out = []
    for t in spec["tensors"]:
        if "when" in t and not evaluate(t["when"], env):
            continue
        shape = tuple(evaluate(d, env) for d in t["shape"])
        if t["dtype"] not in DTYPE_BYTES:
            raise ActivationInputError(f"contract: tensor {t['name']!r} has unknown dtype {t['dtype']!r}")
        src = t["source"]
        out.append((t, LiveTensor(block, t["name"], shape, t["dtype"], math.prod(shape) * DTYPE_BYTES[t["dtype"]],
                                  f"{src['file']} {src['function']}")))
    return out


def _phase_peak(phase: str, scope: list[str], sequence: list[tuple[str, str]], env: dict[str, int]) -> PhasePeak:
    """``scope``: blocks live over the whole phase; ``sequence``: (role, block) run one after the other, whose
    tensors are live over their ``live`` steps ("role.step" names reach across blocks, "first" / "last" the ends)."""
    blocks = contract()["blocks"]
    steps: list[str] = []
    index: dict[str, int] = {}
    for role, block in sequence:
        names = blocks[block]["steps"]
        for s in names:
            index[f"{role}.{s}"] = len(steps)
            steps.append(f"{block}.{s}")
        index[f"{role}.first"], index[f"{role}.last"] = index[f"{role}.{names[0]}"], index[f"{role}.{names[-1]}"]
    ranged: list[tuple[int, int, LiveTensor]] = []
    always: list[LiveTensor] = []
    for block in scope:
        for t, live in _tensors(block, blocks[block], env):
            if "live" in t:
                a, b = (index[x] for x in t["live"])
                ranged.append((a, b, live))
            else:
                always.append(live)
    for role, block in sequence:
        for t, live in _tensors(block, blocks[block], env):
            a, b = (index[f"{role}.{x}"] for x in t["live"])
            ranged.append((a, b, live))
    best, at = -1, 0
    for i in range(len(steps)):
        total = sum(t.bytes for t in always) + sum(t.bytes for a, b, t in ranged if a <= i <= b)
        if total > best:
            best, at = total, i
    live = sorted(always + [t for a, b, t in ranged if a <= at <= b], key=lambda t: -t.bytes)
    return PhasePeak(phase, best, steps[at], tuple(live))


def prefill_peak(model: str, quant: str, tp: int, chunk: int, *, requests: int = 1, prefix: int = 0,
                 spec_algorithm: str | None = "EAGLE", captured_layers: int | None = None, sms: int = 132,
                 cublas_bytes: int = CUBLAS_WORKSPACE) -> ActivationPeak:
    """The activation peak of a ``chunk``-token prefill step of ``model`` (weights ``quant``) on one of ``tp``
    ranks: ``requests`` in the chunk, ``prefix`` tokens already cached before a later chunk (the prompt's first
    chunk has none and runs the MHA path), ``spec_algorithm`` None for no draft (else EAGLE / EAGLE3 / DFLASH:
    the draft's extend and the hidden states it captures), ``sms`` the GPU's SM count (Marlin's workspace)."""
    arch = architecture(model)
    if spec_algorithm is not None and spec_algorithm not in CAPTURED_LAYERS:
        raise ActivationInputError(f"spec_algorithm: expected one of {sorted(CAPTURED_LAYERS)} or None, "
                                   f"got {spec_algorithm!r}")
    captured = captured_layers if captured_layers is not None else CAPTURED_LAYERS.get(spec_algorithm, 0)
    runner = moe_runner(quant)

    def env(p: int) -> dict[str, int]:
        return symbols(arch, tp=tp, tokens=chunk, requests=requests, prefix=p, quant=quant, captured_layers=captured,
                       sms=sms, cublas_bytes=cublas_bytes)

    phases = []
    mlps = [("MoE layer", f"moe_{runner}")] + ([("dense layer", "dense_mlp")] if arch.first_k_dense_replace else [])
    for attn, label, p in (("attention_mha", "MHA attention (a prompt's first chunk)", 0),
                           ("attention_absorbed", "absorbed MLA attention (a chunk after a prefix)", prefix)):
        for kind, mlp in mlps:
            phases.append(_phase_peak(f"{kind}, {label}", ["process", "forward", "layer"],
                                      [("attention", attn), ("mlp", mlp)], env(p)))
    phases.append(_phase_peak("logits (one row per request)", ["process", "forward"], [("logits", "logits")], env(prefix)))
    if spec_algorithm is not None:
        phases.append(_phase_peak(f"draft extend ({spec_algorithm}, estimate)", ["process"], [("draft", "draft_extend")],
                                  env(prefix)))
    top = max(phases, key=lambda p: p.bytes)
    return ActivationPeak(top.bytes, top.phase, tuple(phases), runner, fuses_shared_expert(arch, quant),
                          {"model": model, "quant": quant, "tp": tp, "chunk": chunk, "requests": requests,
                           "prefix": prefix, "spec_algorithm": spec_algorithm, "captured_layers": captured,
                           "sms": sms})


def sglang_reserve_bytes(chunk: int) -> int:
    """What SGLang's default fraction reserves for activations: 1.5 MiB per token of max(chunk, 2048)
    (arg_groups/memory_hook.py handle_gpu_memory_settings)."""
    return int(1.5 * max(chunk, 2048) * (1 << 20))


def measurement_files(root: Path = RESULTS / "h200") -> list[Path]:
    """The committed prefill-activation measurements, oldest first (folders are named by date)."""
    return sorted(root.glob(MEASURED_GLOB))


def load_measurement(path: Path | None = None) -> dict | None:
    """The newest committed measurement (or ``path``), None when there is none."""
    if path is None:
        files = measurement_files()
        if not files:
            return None
        path = files[-1]
    return _read_measurement(str(path), Path(path).stat().st_mtime_ns)


@lru_cache(maxsize=8)
def _read_measurement(path: str, _mtime: int) -> dict:
    data = json.loads(Path(path).read_text())
    data["_path"] = path
    return data


def measured_case(measurement: dict | None, model: str, quant: str, tp: int, chunk: int) -> dict | None:
    """The measured case for this deployment's shapes, or None (the shapes, not the GPU, set the allocations;
    SM-count-sized buffers differ by a few KiB between GPUs)."""
    if not measurement:
        return None
    for case in measurement.get("cases", []):
        if (case["model"], case["quant"], case["tp"], case["chunk"]) == (model, quant, tp, chunk):
            return case
    return None


ACTIVATION_MODELS = ("measured", "modelled", "sglang-reserve")
# the margin over the modelled / measured peak: the caching allocator rounds every block up (2 MiB segments for
# large ones) and keeps freed blocks cached, so what it holds (reserved) runs above the peak of live tensors; and
# the few small tensors the model leaves out (RoPE on strided views, the sampler's, the scheduler's metadata)
DEFAULT_MARGIN = 0.25


@dataclass(frozen=True)
class ActivationLine:
    """One estimate of the activation reserve: ``bytes`` is what a budget counts (the peak plus ``margin``)."""

    model: str  # one of ACTIVATION_MODELS
    peak_bytes: int
    margin: float
    bytes: int
    label: str
    source: str  # measured | modelled | sglang-formula


def activation_lines(model: str, quant: str, tp: int, chunk: int, *, requests: int, context: int,
                     spec_algorithm: str | None, sms: int, margin: float = DEFAULT_MARGIN,
                     measurement: dict | None = None) -> dict[str, ActivationLine]:
    """The three activation estimates of a deployment, by ACTIVATION_MODELS name. "measured" is the committed
    H200 measurement of these shapes (its prefix index re-sized to ``context``) when there is one, else the model,
    labelled as not measured; "modelled" the model; "sglang-reserve" SGLang's 1.5 MiB per token, no margin."""
    if margin < 0:
        raise ActivationInputError(f"activation_margin: a margin cannot be negative, got {margin}")
    modelled = prefill_peak(model, quant, tp, chunk, requests=requests, prefix=context, spec_algorithm=spec_algorithm,
                            sms=sms)
    grown = int(modelled.bytes * (1 + margin))
    pct = f"+ {margin:.0%} margin"
    lines = {"modelled": ActivationLine("modelled", modelled.bytes, margin, grown,
                                        f"activations: {chunk}-token prefill peak, modelled from SGLang's allocations "
                                        f"({pct})", "modelled")}
    case = measured_case(measurement, model, quant, tp, chunk)
    if case is not None and case.get("peak_measured_bytes"):
        peak = int(case["peak_measured_bytes"]) + 8 * (context - int(case["prefix"]))  # int64 prefix slots
        date = Path(measurement.get("_path", "")).parent.name[:10] or "committed"
        lines["measured"] = ActivationLine("measured", peak, margin, int(peak * (1 + margin)),
                                           f"activations: {chunk}-token prefill peak, measured on the H200 {date} "
                                           f"({pct})", "measured")
    else:  # no measurement of these shapes: the model stands in, and says so
        lines["modelled"] = replace(lines["modelled"], label=lines["modelled"].label.replace(
            "modelled from SGLang's allocations (", "modelled from SGLang's allocations, not measured ("))
        lines["measured"] = lines["modelled"]
    reserve = sglang_reserve_bytes(chunk)
    lines["sglang-reserve"] = ActivationLine("sglang-reserve", reserve, 0.0, reserve,
                                             f"activations: what SGLang's default assumes ({max(chunk, 2048)} tokens "
                                             f"x 1.5 MiB)", "sglang-formula")
    return lines
