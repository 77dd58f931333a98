"""Build here, before a device call, the libraries the call would build on the device, into a folder it carries.

A device call spends ~25 s on each library it builds (the normal one, the e4m3 timing one, the phase clocks' one, for
main and for each patch or stack it measures: 4-6 of them, a quarter of an ~8-minute call). The library's file name
is a hash of its sources, flags, archs and nvcc version (kdtree_lab.kernels.build), so one built here with the same
nvcc (V13.0.88 on both machines) is the file the device would build. Each is stored xz-compressed (~6 MB -> ~0.8 MB:
a call's whole working tree, carried wheels included, travels under 64 MiB), and scripts/device_prologue.sh unpacks
whatever the carried folder holds into build/, where the device's build finds it cached. A library whose name does
not match (another nvcc, a tree changed since) is simply not found, and the device builds as before.

    python scripts/prebuild.py TREE... [--variants normal,timing] [--out .prebuilt]
    python scripts/prebuild.py --unpack [.prebuilt]     # on the device (scripts/device_prologue.sh does it)

TREE is ``main`` (this working tree's kernels/) or patch files joined by ``+``, applied in order to a copy of this
working tree's kernels/ (what the device call's ``git apply`` makes of them). Variants: ``normal``, ``timing``
(``KDT_E4M3_TIMING=1``), ``phase`` (``KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1``, as the phase-clocks runs build it).
Then carry the folder with the call: ``carry: [".whl-sglang", ".prebuilt"]``. Exits non-zero, with one line, when a
patch does not apply, a build or its checks fail, or the folder passes ``--max-mib`` (the carry limit is 64 MiB in
all, the wheels take ~27).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "normal": {},
    "timing": {"KDT_E4M3_TIMING": "1"},
    "phase": {"KDT_PHASE_CLOCKS": "1", "KDT_E4M3_TIMING": "1"},
}
SWITCHES = ("KDT_DEBUG_WAITS", "KDT_E4M3_TIMING", "KDT_PHASE_CLOCKS")  # what changes a library (build.debug_defines)


class PrebuildError(RuntimeError):
    """A patch that does not apply, a failed build, or a folder past its size limit (the message says which)."""


def _build(tree: Path, variant: str) -> Path:
    """Build the library of ``tree`` (a folder holding kernels/ and kdtree_lab/) for ``variant``; its path."""
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    env.update(VARIANTS[variant])
    out = subprocess.run([sys.executable, "-m", "kdtree_lab", "build", "--json"], cwd=tree, env=env,
                         capture_output=True, text=True)
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        report = {}
    if out.returncode != 0 or not report.get("ok"):
        raise PrebuildError(f"{tree.name} {variant}: the build or its checks failed (exit {out.returncode}): "
                            f"{(out.stderr or out.stdout).strip().splitlines()[-1:] or ['no output']}")
    return Path(report["build"]["library"])


def _patched_copy(patches: list[Path], into: Path) -> Path:
    """A folder with copies of this tree's kernels/ and kdtree_lab/ (the package finds its kernels beside itself),
    ``patches`` applied in order, and a link to data/ (which the package reads at import)."""
    for name in ("kernels", "kdtree_lab"):
        shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    (into / "data").symlink_to(ROOT / "data")
    for patch in patches:
        out = subprocess.run(["git", "apply", str(patch)], cwd=into, capture_output=True, text=True)
        if out.returncode != 0:
            raise PrebuildError(f"{patch}: does not apply to this tree: {out.stderr.strip().splitlines()[:1]}")
    return into


def prebuild(trees: list[str], variants: list[str], out_dir: Path, max_mib: float) -> list[Path]:
    """Build every (tree, variant) and copy each library and its ptxas log into ``out_dir`` (emptied first)."""
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        raise PrebuildError(f"--variants: expected some of {', '.join(VARIANTS)}, found {', '.join(bad)}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    libs = []
    for tree in trees:
        with tempfile.TemporaryDirectory() as tmp:
            folder = ROOT if tree == "main" else _patched_copy([Path(p).resolve() for p in tree.split("+")], Path(tmp))
            for variant in variants:
                lib = _build(folder, variant)
                with open(lib, "rb") as src, lzma.open(out_dir / f"{lib.name}.xz", "wb", preset=6) as dst:
                    shutil.copyfileobj(src, dst)
                shutil.copy2(lib.with_suffix(".ptxas.log"), out_dir / lib.with_suffix(".ptxas.log").name)
                libs.append(out_dir / f"{lib.name}.xz")
                print(f"{tree} {variant}: {lib.name}", flush=True)
    mib = sum(f.stat().st_size for f in out_dir.iterdir()) / 2**20
    if mib > max_mib:
        raise PrebuildError(f"{out_dir}: expected at most {max_mib:g} MiB to carry, found {mib:.1f} MiB "
                            f"({len(libs)} libraries): name fewer trees or variants")
    print(f"{out_dir}: {len(libs)} libraries, {mib:.1f} MiB", flush=True)
    return libs


def unpack(folder: Path, build: Path = ROOT / "build") -> list[Path]:
    """Each library ``folder`` holds (with its ptxas log) into ``build`` where it is not there yet: the library by
    rename once whole, then its log, so a build that finds both finds them whole (as kdtree_lab.kernels.build
    writes them)."""
    build.mkdir(parents=True, exist_ok=True)
    done = []
    for xz in sorted(folder.glob("*.so.xz")):
        lib, log = build / xz.name[: -len(".xz")], folder / xz.name.replace(".so.xz", ".ptxas.log")
        if lib.exists() or not log.exists():
            continue
        part = lib.with_name(f"{lib.name}.{os.getpid()}.unpack")
        with lzma.open(xz, "rb") as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst)
        part.chmod(0o755)
        part.rename(lib)
        shutil.copy2(log, build / log.name)
        done.append(lib)
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*", help="main, or patch files joined by + (applied in order); with --unpack, "
                    "the folder to unpack (default .prebuilt)")
    ap.add_argument("--unpack", action="store_true", help="put the folder's libraries into build/ (on the device)")
    ap.add_argument("--variants", default="normal,timing", help="comma list of normal, timing, phase")
    ap.add_argument("--out", type=Path, default=ROOT / ".prebuilt")
    ap.add_argument("--max-mib", type=float, default=14.0, help="the folder's largest size (MiB)")
    args = ap.parse_args(argv)
    if args.unpack:
        folder = Path(args.trees[0]) if args.trees else ROOT / ".prebuilt"
        libs = unpack(folder) if folder.is_dir() else []
        print(f"prebuilt: {len(libs)} libraries into build/ ({', '.join(p.name for p in libs) or 'none new'})")
        return 0
    if not args.trees:
        print("prebuild: expected one or more trees (main, or patch files joined by +), found none", file=sys.stderr)
        return 2
    try:
        prebuild(args.trees, [v for v in args.variants.split(",") if v], args.out, args.max_mib)
    except PrebuildError as e:
        print(f"prebuild: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
