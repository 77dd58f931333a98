"""The proof's settings: the drafts and pools it runs, its sizes and counts, and the error that names what broke."""

from __future__ import annotations

from dataclasses import dataclass

SGLANG_VERSION = "0.5.23"
VOCAB = 4096  # the stand-in draft's vocabulary (its logits are random)
VALIDATE_SAME_TOL = 1e-3  # validate mode: SGLang's in-graph output against its own eager run (relative L2)


class ProofError(RuntimeError):
    """One line naming what broke (an SGLang API that differs from 0.5.23's, a hook not installed, ...)."""


@dataclass(frozen=True)
class Draft:
    """One speculative configuration: the server's --speculative-* values and the mask source.
    kind: 'eagle' (SGLang drafts a tree, topk > 1), 'chain' (SGLang, topk 1) or 'ddtree' (our DDTree masks under
    the server's tree settings)."""

    kind: str
    topk: int
    steps: int
    num_draft: int

    @property
    def name(self) -> str:
        return f"{self.kind}-N{self.num_draft}"


DRAFTS = (Draft("eagle", 4, 3, 16), Draft("ddtree", 4, 3, 16), Draft("chain", 1, 3, 4))
KV_CACHE_DTYPES = {"bf16": "auto", "fp8": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # pool -> --kv-cache-dtype


@dataclass(frozen=True)
class Settings:
    max_bs: int = 8  # --cuda-graph-max-bs-decode / --max-running-requests (the request pool's size)
    context: int = 8192  # --context-length: the longest prefix drawn is context - N - 1
    replays: int = 100  # graph replays per capture size and configuration ("on" mode)
    validate_replays: int = 10  # ... in validate mode
    eager_batches: int = 4  # eager batches per configuration
    kvs: tuple[str, ...] = ("bf16", "fp8")
    drafts: tuple[Draft, ...] = DRAFTS
    seed: int = 0
    sms: int = 132  # SM count the backend sizes its split-K buffers for in a dry run (no GPU)
    # the hook's implementation (kdtree_lab.kernels.impls): None is "cuda" on a GPU (the configuration it selects) and
    # the Triton twin in a dry run; a forced one runs SGLang's backend over it (cuda_sm120_roles: what an sm_120 card
    # selects above 32 rows, with e4m3 math over fp8 pools)
    impl: str | None = None

    @classmethod
    def quick(cls, **over) -> "Settings":
        """Well inside a 3-minute device call."""
        return cls(**{"max_bs": 4, "context": 4096, "replays": 5, "validate_replays": 2, "eager_batches": 2, **over})

    @classmethod
    def dry(cls, **over) -> "Settings":
        """The CPU dry run: the smallest shapes that exercise every path."""
        return cls(**{"max_bs": 2, "context": 160, "replays": 1, "validate_replays": 1, "eager_batches": 1,
                      "drafts": (Draft("eagle", 2, 2, 4), Draft("ddtree", 2, 2, 4), Draft("chain", 1, 2, 3)),
                      **over})
