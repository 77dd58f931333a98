"""SGLang 0.5.23's own TritonAttnBackend drives the kdtree verify hook: eager target verify, CUDA-graph capture and
replay, and the inputs the hook must refuse (kdtree_lab/lab/sglang_backend_proof/ says what each phase
checks).

Needs SGLang 0.5.23 and the packages its Triton backend imports (``scripts/fetch_wheels.sh --sglang-state`` gathers
them for the H200). On the H200 (results committed under data/results/h200/):

    python3 scripts/sglang_backend_proof.py --out $OUT/backend-proof.json            # 100 replays per size
    python3 scripts/sglang_backend_proof.py --quick --out $OUT/backend-proof.json    # under 3 minutes
    python3 scripts/sglang_backend_proof.py --impl cuda_sm120_roles --out ...        # an sm_120 card's kernels

Without a GPU it runs as a dry run (the Triton interpreter, graphs replaced by eager calls), which is how
tests/test_sglang_backend_proof.py runs it. The JSON is rewritten after every row: a run cut off leaves its rows
and a status that says so. Exit status: 0 all passed, 1 a check failed, 2 the proof could not run (one line
naming what broke).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported: the dry run's kernels interpret

from kdtree_lab.lab.provenance import provenance  # noqa: E402
from kdtree_lab.lab import sglang_backend_proof as proof  # noqa: E402
from sglang_memory_defaults import MODEL_CONFIG  # noqa: E402  (the DeepSeek-V3 / Kimi-K2 shape: MLA, 64 heads)


def settings(a: argparse.Namespace) -> proof.Settings:
    gpu = torch.cuda.is_available()
    base = proof.Settings.dry if not gpu else (proof.Settings.quick if a.quick else proof.Settings)
    over = {k: v for k, v in (("max_bs", a.max_bs), ("context", a.context), ("replays", a.replays),
                              ("validate_replays", a.validate_replays), ("eager_batches", a.eager_batches),
                              ("seed", a.seed), ("sms", a.sms), ("impl", a.impl)) if v is not None}
    if a.kv:
        over["kvs"] = tuple(a.kv.split(","))
    st = base(**over)
    if a.drafts:
        kinds = a.drafts.split(",")
        unknown = sorted(set(kinds) - {d.kind for d in st.drafts})
        if unknown:
            raise SystemExit(f"sglang_backend_proof: --drafts: expected kinds among "
                             f"{','.join(d.kind for d in st.drafts)}, found {','.join(unknown)}")
        st = proof.Settings(**{**st.__dict__, "drafts": tuple(d for d in st.drafts if d.kind in kinds)})
    return st


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file, rewritten after every row")
    ap.add_argument("--quick", action="store_true", help="smaller batches and contexts, 5 replays per size")
    ap.add_argument("--replays", type=int, help="graph replays per capture size in mode on (default 100; quick 5)")
    ap.add_argument("--validate-replays", type=int, help="... in validate mode (default 10; quick 2)")
    ap.add_argument("--eager-batches", type=int, help="eager batches per configuration (default 4; quick 2)")
    ap.add_argument("--max-bs", type=int, help="the request pool / largest captured batch (default 8; quick 4)")
    ap.add_argument("--context", type=int, help="--context-length (default 8192; quick 4096)")
    ap.add_argument("--kv", help="pools, comma-separated: bf16,fp8 (default both)")
    ap.add_argument("--drafts", help="draft kinds, comma-separated: eagle,ddtree,chain (default all)")
    ap.add_argument("--modes", default="on,validate", help="hook modes for the graph phase")
    ap.add_argument("--phases", default="eager,graph,refuse")
    ap.add_argument("--impl", help="the hook's implementation (kdtree_lab.kernels.impls; default cuda, what this GPU "
                    "selects; cuda_sm120_roles: what an sm_120 card runs above 32 rows, e4m3 math over fp8 pools)")
    ap.add_argument("--seed", type=int, help="fresh random data per run: defaults to a new seed each run")
    ap.add_argument("--sms", type=int, help="SM count a dry run sizes SGLang's split-K buffers for (132)")
    a = ap.parse_args(argv)
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    st = settings(a)
    out = Path(a.out)
    try:
        data = proof.run(st, out, MODEL_CONFIG, modes=tuple(a.modes.split(",")), phases=tuple(a.phases.split(",")))
    except proof.ProofError as exc:
        print(f"sglang_backend_proof: {exc}", file=sys.stderr)
        return 2
    data["provenance"] = provenance("python scripts/sglang_backend_proof.py " + " ".join(argv or sys.argv[1:]))
    out.write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(proof.summary_table(data))
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
