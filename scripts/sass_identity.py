"""Prove a kernel-source refactor changed no instruction: build the library from two trees (the library's own nvcc
command, kdtree_lab.kernels.build) for sm_120a and sm_90a, normal and timing library (KDT_E4M3_TIMING=1), dump each
kernel's SASS with cuobjdump and compare per-kernel hashes and the ptxas resource lines. No GPU needed. A kernel whose
encodings differ but whose instructions are the same one for one, registers and control bits (stalls, scoreboards)
included, once a compare's operands are put in one order (ISETP.GT a, b is ISETP.LT b, a) and operand-reuse hints
dropped, is reported EQUIV (the same computation in the same schedule). For a kernel that differs, the share of its
instructions still in the first tree's order with register, predicate and barrier numbers and constants ignored
(``in_order``): how far ptxas rescheduled code a change did not touch.

    python scripts/sass_identity.py build OUT --kernels DIR [--timing]   # OUT/lib.so, OUT/ptxas.log, OUT/sass/*.sass
    python scripts/sass_identity.py compare BEFORE AFTER [--json FILE]   # exit 1 when a kernel differs (not EQUIV)
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kdtree_lab.core.cuda_tools import find_cuda_tool, find_nvcc  # noqa: E402
from kdtree_lab.kernels import build as B  # noqa: E402

ARCHS = ("sm_120a", "sm_90a")


def build(out: Path, kernels: Path, timing: bool) -> None:
    """The library's nvcc command (build_library's flags, defines and gencodes) on kernels/kdtree_verify.cu of another
    tree, then per-kernel SASS files."""
    nvcc, cuobjdump = find_nvcc(), find_cuda_tool("cuobjdump")
    if not nvcc or not cuobjdump:  # before minutes of nvcc, not after
        sys.exit(f"sass_identity.py build: expected nvcc and cuobjdump (PATH, beside nvcc or in the triton wheel), "
                 f"found nvcc={nvcc}, cuobjdump={cuobjdump}")
    out.mkdir(parents=True, exist_ok=True)
    lib = out / "lib.so"
    cmd = B.nvcc_command(nvcc, ARCHS, lib, kernels, ("-DKDT_E4M3_TIMING_PROXY",) if timing else ())
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-4000:])
    (out / "ptxas.log").write_text(proc.stderr)
    (out / "command.txt").write_text(" ".join(cmd) + "\n")
    sass_dir = out / "sass"
    sass_dir.mkdir(exist_ok=True)
    for arch in ARCHS:
        text = subprocess.run([cuobjdump, "-sass", "-arch", arch.rstrip("a"), str(lib)], capture_output=True,
                              text=True, check=True).stdout
        for name, body in functions(text).items():
            (sass_dir / f"{arch}.{name}.sass").write_text(body)


def functions(sass: str) -> dict[str, str]:
    """cuobjdump -sass text split per function: mangled name -> its instructions (with encodings)."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif cur and re.match(r"\s*/\*[0-9a-f]{4,}\*/|\s*/\* 0x", line):  # addresses past 0xffff have 5+ digits
            out[cur].append(line.strip())
    return {k: "\n".join(v) + "\n" for k, v in out.items()}


def resources(log: str) -> dict[str, str]:
    """ptxas -v: '<arch> <function>' -> its 'Used N registers, ...' line (with the spill line before it)."""
    res: dict[str, str] = {}
    arch = func = spill = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for '(sm_\w+)'", line)
        if m:
            func, arch, spill = m.group(1), m.group(2), None
        elif func and "bytes stack frame" in line:
            spill = line.split("info    :", 1)[-1].strip()
        elif func and "Used" in line and "registers" in line:
            res[f"{arch} {func}"] = f"{spill}; {line.split('info    :', 1)[-1].strip()}"
    return res


_COMMUTED = {"GT": "LT", "GE": "LE", "GTU": "LTU", "GEU": "LEU"}
_SWAPPABLE = re.compile(r"^(@!?U?P\w+ +)?(U?ISETP|FSETP|DSETP)\.(GTU?|GEU?)(\.\S*)? (\S+), (\S+), (\S+), (\S+), (\S+)$")
_REUSE = 0xF << 58  # the high word's operand-reuse flags (a hint to the register file's operand cache)


def control(hi: int) -> int:
    """An instruction's control bits from its second (high) encoding word: the top 23 bits less the reuse flags, the
    stall count (cycles before the warp's next instruction) in the low 4, then yield, scoreboards and wait mask."""
    return (hi & ~_REUSE) >> 41


def _instructions(body: str) -> list[tuple[str, int]]:
    """(text, control bits) of each instruction of a function (``functions``' form): the text with operand-reuse hints
    dropped and each two-operand compare written one way (``?SETP.GT|GE a, b`` as ``?SETP.LT|LE b, a``; ISETP,
    UISETP, FSETP, DSETP only, where that is the same predicate), the control bits the high encoding word's top 23
    (stall count, yield, scoreboards, wait mask) without the reuse flags."""
    out: list[tuple[str, int]] = []
    lines = body.splitlines()
    for k, line in enumerate(lines):
        m = re.match(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line.strip())
        if not m:
            continue
        text = m.group(1).replace(".reuse", "").replace(" ,", ",")
        c = _SWAPPABLE.match(text)
        if c:
            guard, op, cmp, rest, p, q, a, b, r = c.groups()
            text = f"{guard or ''}{op}.{_COMMUTED[cmp]}{rest or ''} {p}, {q}, {b}, {a}, {r}"
        hi = re.search(r"0x([0-9a-f]{16})", lines[k + 1]) if k + 1 < len(lines) else None
        out.append((text, control(int(hi.group(1), 16)) if hi else -1))
    return out


def canonical(body: str) -> list[str]:
    """What EQUIV compares: each instruction's ``_instructions`` text (registers kept) with its control bits, so two
    functions are equivalent when they issue the same operations on the same registers in the same schedule."""
    return [f"{text} [{ctrl:#x}]" for text, ctrl in _instructions(body)]


def shapes(body: str) -> list[str]:
    """A function's instruction texts (``_instructions``, no control bits) with register, predicate and barrier numbers
    and constants replaced by placeholders: what stays when ptxas only renames."""
    out = []
    for text, _ in _instructions(body):
        text = re.sub(r"\b(?:U?R\d+|U?P\d|B\d+)\b", "r", text)
        out.append(re.sub(r"0x[0-9a-f]+", "c", text))
    return out


def in_order(before: str, after: str) -> float:
    """The share of ``before``'s instructions (``shapes``) found in ``after`` in the same order (difflib's matching
    blocks, no junk heuristic; a lower bound of the longest common subsequence): 1.0 for a renaming only."""
    a, b = shapes(before), shapes(after)
    if not a:
        return 1.0 if not b else 0.0
    blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    return sum(m.size for m in blocks) / len(a)


def compare(before: Path, after: Path) -> dict:
    rows, differ = [], 0
    names = sorted({p.name for p in (before / "sass").iterdir()} | {p.name for p in (after / "sass").iterdir()})
    res_b, res_a = resources((before / "ptxas.log").read_text()), resources((after / "ptxas.log").read_text())
    for n in names:
        text_b, text_a = ((d / "sass" / n).read_text() if (d / "sass" / n).exists() else None for d in (before, after))
        hb, ha = (hashlib.sha256(t.encode()).hexdigest()[:16] if t is not None else None for t in (text_b, text_a))
        arch, func = n.removesuffix(".sass").split(".", 1)
        rb, ra = res_b.get(f"{arch} {func}"), res_a.get(f"{arch} {func}")
        both = hb and ha and hb != ha
        equiv = bool(both and rb == ra and canonical(text_b) == canonical(text_a))
        same = hb == ha and rb == ra
        differ += not (same or equiv)
        order = round(in_order(text_b, text_a), 3) if both else None
        rows.append({"arch": arch, "kernel": B._short(func), "mangled": func, "sass_before": hb, "sass_after": ha,
                     "instructions": len(text_a.splitlines()) // 2 if text_a is not None else None,
                     "resources_before": rb, "resources_after": ra, "identical": same, "equivalent": same or equiv,
                     "in_order": order})
    return {"kernels": rows, "differ": differ}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out", type=Path)
    b.add_argument("--kernels", type=Path, default=B.KERNELS)
    b.add_argument("--timing", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.cmd == "build":
        build(args.out, args.kernels, args.timing)
        return
    r = compare(args.before, args.after)
    for row in r["kernels"]:
        order = f"{row['in_order']:4.0%} in order" if row["in_order"] is not None else " " * 13
        verdict = "same  " if row["identical"] else "EQUIV " if row["equivalent"] else "DIFFER"
        print(f"{verdict} {row['arch']:8} {row['kernel']:40} "
              f"{row['sass_before']} {row['sass_after']}  {order}  {row['resources_after']}")
    if args.json:
        args.json.write_text(json.dumps(r, indent=1) + "\n")
    sys.exit(1 if r["differ"] else 0)


if __name__ == "__main__":
    main()
