"""Text the model learns and the prompts it continues: Python's own standard library sources, as bytes.

A model with random weights has logits whose top two are a hair apart, so greedy decoding flips on rounding and a
token-for-token comparison proves nothing. A short training on real text gives real margins (the run records their
distribution). The text ships with every Python: the standard library's top-level ``.py`` files in name order; the
run records their SHA-256 (Python 3.11 here and 3.12 on the GPU image hold different files, so the trained weights
differ between them; each run is self-consistent).
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from .model import ModelSpec, build, round_weights


_NON_ASCII = bytes(range(128, 256))


def text(max_bytes: int = 8 << 20) -> bytes:
    """The standard library's top-level sources in name order, ASCII bytes only, up to ``max_bytes``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out, size = [], 0
    for path in sorted(root.glob("*.py")):
        raw = path.read_bytes().translate(None, _NON_ASCII)
        out.append(raw)
        size += len(raw)
        if size >= max_bytes:
            break
    return b"".join(out)[:max_bytes]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True)
class TrainSpec:
    """A short training: ``steps`` AdamW steps of ``batch`` windows of ``seq`` bytes at learning rate ``lr``; the
    loss is the last layer's cross-entropy plus ``exit_weight`` x the first layer's exit (the draft, LayerSkip's
    early-exit loss); ``seed`` picks the windows."""

    steps: int = 300
    batch: int = 32
    seq: int = 256
    lr: float = 3e-3
    exit_weight: float = 0.5
    seed: int = 0


@dataclass
class Trained:
    """A trained model (fp32, weights rounded to bf16) with what it learned on."""

    model: object
    spec: ModelSpec
    train: TrainSpec
    corpus_sha: str
    corpus_bytes: int
    losses: list[float]  # per logged step: the last layer's loss (nats per byte)
    exit_losses: list[float]  # the draft's (first layer's exit)


def exit_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The draft's logits from the first layer's output: the target's final norm and head over it."""
    return model.lm_head(model.model.norm(hidden))


def train(spec: ModelSpec, how: TrainSpec = TrainSpec(), device: str | torch.device = "cpu",
          data: bytes | None = None, log_every: int = 25) -> Trained:
    """Build ``spec`` and train it on the corpus (``data``, default ``text()``); the weights end rounded to bf16."""
    data = data if data is not None else text()
    if len(data) < how.seq + 2:
        raise ValueError(f"data: expected more than seq + 1 = {how.seq + 1} bytes, found {len(data)}")
    model = build(spec).to(device).train()
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.long)
    gen = torch.Generator().manual_seed(how.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=how.lr, weight_decay=0.01, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=how.lr, total_steps=how.steps, pct_start=0.1)
    losses, exits = [], []
    for step in range(how.steps):
        starts = torch.randint(0, len(tokens) - how.seq - 1, (how.batch,), generator=gen)
        win = torch.stack([tokens[s:s + how.seq + 1] for s in starts.tolist()]).to(device)
        out = model(input_ids=win[:, :-1], output_hidden_states=True)
        target = win[:, 1:].reshape(-1)
        loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]).float(), target)
        early = exit_logits(model, out.hidden_states[1])
        exit_loss = torch.nn.functional.cross_entropy(early.reshape(-1, early.shape[-1]).float(), target)
        opt.zero_grad(set_to_none=True)
        (loss + how.exit_weight * exit_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == how.steps - 1:
            losses.append(loss.item())
            exits.append(exit_loss.item())
    model.eval()
    round_weights(model)
    return Trained(model=model, spec=spec, train=how, corpus_sha=digest(data), corpus_bytes=len(data),
                   losses=losses, exit_losses=exits)


def prompts(data: bytes, count: int, length: int, seed: int = 1) -> list[list[int]]:
    """``count`` prompts of ``length`` bytes: windows of the corpus at seeded offsets (a prompt longer than the
    corpus repeats it)."""
    if count < 1 or length < 2:
        raise ValueError(f"prompts: expected count >= 1 and length >= 2, found {count}, {length}")
    gen = torch.Generator().manual_seed(seed)
    buf = data * (length // len(data) + 2)
    starts = torch.randint(0, len(data), (count,), generator=gen).tolist()
    return [list(buf[s:s + length]) for s in starts]
