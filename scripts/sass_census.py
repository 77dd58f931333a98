"""A static census of a kernel's MMA loops in its SASS (no GPU): for each innermost loop that issues tensor-core MMAs (a
backward branch's range holding HMMA / QMMA / HGMMA and no smaller such loop), its instruction count, the classes
that matter for a prediction (MMAs, shared and global loads and stores, shuffles, MUFU, barriers and mbarrier
operations, spills) and the longest chain of dependent warp-level MMAs in one pass (`chain`: each MMA that
accumulates onto the register another one wrote, with no other write between; a warp issuing n MMAs in chains of
depth d waits on the MMA latency unless n / d chains cover it), and from each instruction's control bits (bits 105-108:
the cycles the warp waits before its next instruction, ptxas's fixed stall) the loop's `issue` cycles, their sum over
one pass (what one warp takes through it with no scoreboard, pipe or scheduler wait), and `mma_stall`, the stall
ptxas gives most of its MMAs. The counts are static (a branch inside a loop, such
as a rescale that is usually skipped, counts in full: `FMUL` is listed so it can be subtracted). What
docs/performance-history.md's census did by hand, for a prediction written before a device call.

With `--timeline`, a kernel's global loads, asynchronous copies, waits and MMAs in program order, runs of one kind
collapsed: whether ptxas issued a load before or after a wait the source put it ahead of (it sinks read-only loads
past barriers and mbarrier waits to their first use: `e4m3-64-q-early.patch` in
data/results/h100/2026-12-06-draft-prologue-and-combine/, which moved them back and no call's time with them).

With `--budget START:WARPS[:nofmul][:skip=LO-HI[+LO-HI...]],...`, an estimate of a scheduler's issue for one tile:
the loops named by their start address, each run by WARPS warps on a scheduler, their MMAs at `MMA_CYCLES[arch]`
cycles each and their other instructions (NOPs not counted; `nofmul` leaves out the loop's FMULs, a rescale's branch
that is usually skipped; `skip=` leaves out every instruction in address ranges a steady-state tile does not run,
such as a first-tile copy of a block, read off the SASS). On GH100 each other instruction added about a cycle to the
MMA's six in most arrangements measured (data/results/h100/2026-12-07-mma-issue-and-one-term/; four warps of eight
chains overlapped most of it), so there the estimate is MMAs x 6 + others, not a bound; on sm_120a the cards' pipe
takes an MMA every 16 cycles a scheduler, and whether their other instructions hide inside that interval no card
here has said: both sums are printed.

    python scripts/sass_census.py LIB --kernel verify_sm120_roles_kernel [--arch sm_90a] [--loads] [--json FILE]
    python scripts/sass_census.py LIB --kernel verify_reduce_kernel --timeline
    python scripts/sass_census.py LIB --kernel verify_sm120_e4m3_kernelILi64 \
        --budget 0x2570:1,0x59a0:2:nofmul:skip=0x59c0-0x63a0
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kdtree_lab.core.cuda_tools import find_cuda_tool  # noqa: E402
from sass_identity import control, functions  # noqa: E402

# instruction classes (an opcode's first word, without modifiers) -> the counted name
CLASSES = {"MMA": ("HMMA", "QMMA", "HGMMA", "IMMA"), "LDSM": ("LDSM",), "LDS": ("LDS",), "STS": ("STS",),
           "global": ("LDG", "STG", "LDGSTS", "RED", "ATOMG"), "SHFL": ("SHFL",), "MUFU": ("MUFU",),
           "BAR": ("BAR",), "mbarrier": ("SYNCS",), "spill": ("LDL", "STL"), "FMUL": ("FMUL",), "NOP": ("NOP",)}
MMA_OPS = CLASSES["MMA"]


def instructions(body: str) -> list[tuple[int, str]]:
    """(address, instruction text without predicate guard) of a function's SASS (sass_identity.functions' form)."""
    out = []
    for line in body.splitlines():
        m = re.match(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line.strip())
        if m:
            out.append((int(m.group(1), 16), unguarded(m.group(2))))
    return out


def unguarded(text: str) -> str:
    """An instruction's text without its predicate guard (``@P0 HMMA...`` -> ``HMMA...``)."""
    return re.sub(r"^@!?U?P\w+\s+", "", text.strip())


def stall_counts(body: str) -> dict[int, int]:
    """Address -> the stall count ptxas encoded in an instruction's control bits (sass_identity.control: cycles before
    the warp issues its next instruction) for a function's SASS (sass_identity.functions' form)."""
    out = {}
    lines = body.splitlines()
    for k, line in enumerate(lines[:-1]):
        m = re.match(r"/\*([0-9a-f]{4,})\*/\s+.*?;\s*/\* 0x[0-9a-f]{16} \*/", line.strip())
        hi = re.match(r"/\* 0x([0-9a-f]{16}) \*/", lines[k + 1].strip())
        if m and hi:
            out[int(m.group(1), 16)] = control(int(hi.group(1), 16)) & 0xF
    return out


def opcode(text: str) -> str:
    return text.split()[0].split(".")[0] if text else ""


_NO_DEST = ("ST", "BAR", "RED", "BRA", "EXIT", "WARPSYNC", "NOP", "LDGSTS", "ARRIVES", "ISETP", "FSETP", "PLOP3")


def _written(text: str) -> list[int]:
    """The registers an instruction writes (its first operand and, by its width suffix, the ones after it); none
    for stores, barriers, branches and predicate-only results."""
    op = opcode(text)
    m = re.search(r"\s(R\d+)\b", text)
    if op.startswith(_NO_DEST) or op == "SYNCS" and "ARRIVE" not in text or not m:
        return []
    width = 4 if ".128" in text.split()[0] else 2 if ".64" in text.split()[0] else 1
    first = int(m.group(1)[1:])
    return list(range(first, first + width))


def mma_chain(body: list[str]) -> int:
    """The longest chain of dependent warp-level MMAs (HMMA, QMMA, IMMA: D, A, B, C operands; D and C four fp32
    registers) in ``body`` taken once, in order, as one pass of a loop: an MMA whose C operand is the D of an earlier
    one, none of those registers written since, continues it. Per pass: a chain carried across the loop's back edge
    (an accumulator kept over tiles) counts 1, and both arms of a branch are walked as one sequence."""
    owner: dict[int, tuple[int, int]] = {}  # register -> (the MMA that wrote it, that MMA's chain depth)
    longest = 0
    for k, text in enumerate(body):
        regs = re.findall(r"\bR(\d+|Z)\b", text)
        if opcode(text) in ("HMMA", "QMMA", "IMMA") and len(regs) >= 4:
            d0, c0 = int(regs[0]), regs[3]
            prev = {owner.get(int(c0) + i) for i in range(4)} if c0 != "Z" else {None}
            depth = prev.pop()[1] + 1 if len(prev) == 1 and None not in prev else 1
            owner.update({d0 + i: (k, depth) for i in range(4)})
            longest = max(longest, depth)
        else:
            for r in _written(text):
                owner.pop(r, None)
    return longest


def _innermost_loops(ins: list[tuple[int, str]], holds) -> list[tuple[int, int, list[str]]]:
    """(start, back edge, body) of the innermost loops whose body ``holds`` (a test on its instruction texts): the
    ranges [target, branch] of backward branches, less those that run over an EXIT or RET (a function's cold code
    after its exit that branches back into a loop's middle, not a loop of its own) and those holding a smaller one."""
    ranges = []
    for addr, text in ins:
        m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            body = [t for a, t in ins if lo <= a <= addr]
            if holds(body) and not any(opcode(t) in ("EXIT", "RET") for t in body):
                ranges.append((lo, addr, body))
    return [r for r in ranges if not any(o is not r and r[0] <= o[0] and o[1] <= r[1] for o in ranges)]


def mma_loops(ins: list[tuple[int, str]], stalls: dict[int, int] | None = None) -> list[dict]:
    """The innermost MMA loops: ranges [target, branch] of backward branches that hold an MMA and no smaller range
    that does, each with its counts; with ``stalls`` (``stall_counts``) its ``issue`` cycles and ``mma_stall``."""
    inner = _innermost_loops(ins, lambda body: any(opcode(t) in MMA_OPS for t in body))
    rows = []
    for lo, hi, body in sorted(inner, key=lambda r: r[0]):
        ops = [opcode(t) for t in body]
        row = {"start": hex(lo), "end": hex(hi), "instructions": len(body)}
        row |= {name: sum(o in names for o in ops) for name, names in CLASSES.items()}
        row["chain"] = mma_chain(body)
        if stalls is not None:
            span = [(a, t) for a, t in ins if lo <= a <= hi]
            row["issue"] = sum(stalls.get(a, 0) for a, _ in span)
            mma = [stalls[a] for a, t in span if opcode(t) in MMA_OPS and a in stalls]
            row["mma_stall"] = statistics.mode(mma) if mma else None
        rows.append(row)
    return rows


# cycles a scheduler spends on one warp-level MMA (m16n8k16 bf16/f16, m16n8k32 e4m3): sm_90a measured on an H100
# (one warp of four chains 6.3 cycles, two warps 6.0 a scheduler); sm_120a the cards' published rate (1,024 bf16 FLOPs
# a clock an SM: 4,096 FLOPs a scheduler every 16 cycles), the spacing ptxas writes there too
MMA_CYCLES = {"sm_90a": 6, "sm_120a": 16}


def budget(rows: list[dict], spec: str, arch: str, ins: list[tuple[int, str]] = ()) -> dict:
    """An estimate of a scheduler's issue for one tile from ``mma_loops`` rows: ``spec`` is
    ``START:WARPS[:nofmul][:skip=LO-HI[+LO-HI...]],...`` (a loop by its start address, the warps a scheduler that run
    it, `nofmul` to leave its FMULs out as a skipped rescale, `skip=` to leave out the instructions of ``ins``, the
    function's ``instructions``, in those address ranges). Returns the MMAs and other instructions a scheduler
    issues, ``mma_cycles`` (MMAs x MMA_CYCLES[arch]) and ``serial`` (those plus one cycle an other instruction:
    GH100's usual measured behaviour). Raises ValueError naming ``--budget`` on a malformed item."""
    by_start = {int(r["start"], 16): r for r in rows}
    mmas = others = 0
    seen: set[int] = set()
    for item in spec.split(","):
        parts = item.strip().split(":")
        try:
            start, warps = int(parts[0], 16), int(parts[1])
            flags = parts[2:]
            nofmul = "nofmul" in flags
            skips = [tuple(int(x, 16) for x in rng.split("-")) for f in flags if f.startswith("skip=")
                     for rng in f[len("skip="):].split("+")]
            if any(f != "nofmul" and not f.startswith("skip=") for f in flags) or any(len(r) != 2 for r in skips):
                raise ValueError
        except (ValueError, IndexError):
            raise ValueError(f"--budget: expected START:WARPS[:nofmul][:skip=LO-HI[+LO-HI...]] (hex addresses), "
                             f"found {item!r}") from None
        if warps < 1 or start in seen:
            raise ValueError(f"--budget: expected each loop once with WARPS >= 1, found {item!r}")
        seen.add(start)
        if start not in by_start:
            raise ValueError(f"--budget: expected a loop start among {', '.join(r['start'] for r in rows)}, "
                             f"found {parts[0]}")
        r = by_start[start]
        n, mma, nop, fmul = r["instructions"], r["MMA"], r["NOP"], r["FMUL"]
        end = int(r["end"], 16)
        for addr, text in ins:
            if start <= addr <= end and any(lo <= addr <= hi for lo, hi in skips):
                op = opcode(text)
                n, mma, nop, fmul = n - 1, mma - (op in MMA_OPS), nop - (op == "NOP"), fmul - (op == "FMUL")
        mmas += warps * mma
        others += warps * (n - mma - nop - (fmul if nofmul else 0))
    cycles = mmas * MMA_CYCLES[arch]
    return {"mmas": mmas, "others": others, "mma_cycles": cycles, "serial": cycles + others}


def load_loops(ins: list[tuple[int, str]]) -> list[dict]:
    """The innermost loops that issue global loads (LDG, not the asynchronous LDGSTS): per loop its instructions, its
    loads and how many of them one pass issues before the first instruction that reads a loaded register (`ahead`):
    a pass waits on a load's round trip that often at least, loads / ahead times (a loop of one 32-dim step whose
    four loads are all waited on before the next step's: ahead 4, one round trip a pass)."""
    inner = _innermost_loops(ins, lambda body: any(opcode(t) == "LDG" for t in body))
    rows = []
    for lo, hi, body in sorted(inner, key=lambda r: r[0]):
        loaded: set[str] = set()
        ahead = 0
        for text in body:
            regs = re.findall(r"\bR\d+\b", text)
            sources = set(regs[1:] if _written(text) else regs)
            if loaded & sources:  # an instruction (a load's address too) that waits on a loaded register
                break
            if opcode(text) == "LDG":
                loaded.update(f"R{r}" for r in _written(text))
                ahead += 1
        rows.append({"start": hex(lo), "end": hex(hi), "instructions": len(body),
                     "loads": sum(opcode(t) == "LDG" for t in body), "ahead": ahead})
    return rows


def _event(text: str) -> str | None:
    """What an instruction is on the timeline, or None: a global load by width (`.nc` for a read-only one), an
    asynchronous copy, a wait (cp.async, a named barrier, an mbarrier, griddepcontrol.wait), an mbarrier arrival, a
    register move (setmaxnreg), a tensor-core MMA, an exit."""
    op, first = opcode(text), text.split()[0]
    if op == "LDG":
        width = next((w for w in ("128", "64", "U16", "U8", "S16", "S8") if f".{w}" in first), "32")
        return f"LDG.{width}" + (".nc" if ".CONSTANT" in first else "")
    if op == "SYNCS":
        return "mbarrier wait" if "PHASECHK" in first else "mbarrier arrive" if "ARRIVE" in first else None
    named = {"LDGSTS": "cp.async", "LDGDEPBAR": "cp.async commit", "DEPBAR": "cp.async wait", "ACQBULK":
             "griddepcontrol.wait", "ARRIVES": "cp.async arrive", "USETMAXREG": "setmaxnreg", "EXIT": "EXIT"}
    if op in named:
        return named[op]
    if op == "BAR" and ".SYNC" in first:
        return "bar.sync " + " ".join(text.split()[1:])
    return "MMA" if op in MMA_OPS else None


def timeline(ins: list[tuple[int, str]]) -> list[dict]:
    """The function's events (_event) in program order, consecutive ones of one kind as one row with their count."""
    rows: list[dict] = []
    for addr, text in ins:
        what = _event(text)
        if what is None:
            continue
        if rows and rows[-1]["event"] == what and not what.startswith(("bar.sync", "EXIT")):
            rows[-1]["count"] += 1
        else:
            rows.append({"start": hex(addr), "event": what, "count": 1})
    return rows


def kernel_sass(library: Path, kernel: str, arch: str) -> dict[str, str]:
    """The SASS of each function of the library on ``arch`` whose mangled name contains ``kernel`` (one cuobjdump
    run; sass_identity.functions' form)."""
    text = subprocess.run([find_cuda_tool("cuobjdump"), "-sass", "-arch", arch.rstrip("a"), str(library)],
                          capture_output=True, text=True, check=True).stdout
    return {name: body for name, body in functions(text).items() if kernel in name}


def _walk(walk, body: str) -> list[dict]:
    """``walk`` of one function's SASS: ``mma_loops`` with its stall counts, any other walk of its instructions."""
    return mma_loops(instructions(body), stall_counts(body)) if walk is mma_loops else walk(instructions(body))


def census(library: Path, kernel: str, arch: str, walk=mma_loops) -> dict[str, list[dict]]:
    """Per function of the library whose mangled name contains ``kernel``: ``walk`` of its instructions on ``arch``
    (its innermost MMA loops; ``load_loops``: its innermost loops of global loads; ``timeline``: its events)."""
    return {name: _walk(walk, body) for name, body in kernel_sass(library, kernel, arch).items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("library", type=Path)
    ap.add_argument("--kernel", required=True, help="a substring of the kernels' mangled names")
    ap.add_argument("--arch", default="sm_90a", help="sm_90a (what the H200 runs of every kernel) or sm_120a")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--loads", action="store_true",
                      help="the loops of global loads instead (a prologue's): loads a pass and how many go ahead")
    mode.add_argument("--timeline", action="store_true",
                      help="the loads, copies, waits and MMAs in program order instead (runs of one kind collapsed)")
    ap.add_argument("--budget", metavar="START:WARPS[:nofmul][:skip=LO-HI],...",
                    help="an estimate of a scheduler's issue for one tile over these MMA loops (one kernel)")
    ap.add_argument("--json", type=Path, help="also write the census here")
    a = ap.parse_args(argv)
    if a.budget and (a.loads or a.timeline):
        print("--budget: expected the MMA census (without --loads / --timeline)", file=sys.stderr)
        return 2
    if a.budget and a.arch not in MMA_CYCLES:
        print(f"--arch: expected one of {', '.join(MMA_CYCLES)} with --budget, found {a.arch}", file=sys.stderr)
        return 2
    bodies = kernel_sass(a.library, a.kernel, a.arch)
    walk = timeline if a.timeline else load_loops if a.loads else mma_loops
    result = {name: _walk(walk, body) for name, body in bodies.items()}
    if not result:
        print(f"--kernel: no function of {a.library} contains {a.kernel!r}", file=sys.stderr)
        return 2
    for name, rows in result.items():
        if a.timeline:
            print(f"{name} ({a.arch}): {len(rows)} events")
            for r in rows:
                print(f"  {r['start']:>8} {r['event']}" + (f" x{r['count']}" if r["count"] > 1 else ""))
            continue
        cols = (["start", "instructions", "loads", "ahead"] if a.loads
                else ["start", "instructions", *CLASSES, "chain", "issue", "mma_stall"])
        what = "load loop" if a.loads else "MMA loop"
        print(f"{name} ({a.arch}): {len(rows)} {what}{'s' * (len(rows) != 1)}")
        print("  " + " ".join(f"{c:>9}" for c in cols))
        for r in rows:
            print("  " + " ".join(f"{r[c]:>9}" for c in cols))
        if a.budget:
            try:
                b = budget(rows, a.budget, a.arch, instructions(bodies[name]))
            except ValueError as exc:
                print(exc, file=sys.stderr)
                return 2
            print(f"  a scheduler a tile: {b['mmas']} MMAs x {MMA_CYCLES[a.arch]} = {b['mma_cycles']} cycles, "
                  f"{b['others']} other instructions; both serial (GH100's usual measured issue) {b['serial']} cycles")
    if a.json:
        a.json.write_text(json.dumps({"library": str(a.library), "arch": a.arch, "functions": result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
