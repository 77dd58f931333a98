"""Build here, before a device call, the libraries the call would build on the device, into a folder it carries.

A device call spends ~25 s on each library it builds (the normal one, the e4m3 timing one, the phase clocks' one, for
main and for each patch or stack it measures: 4-6 of them, a quarter of an ~8-minute call). The library's file name
is a hash of its sources, flags, archs and nvcc version (kdtree_lab.kernels.build), so one built here with the same
nvcc (V13.0.88 on both machines) is the file the device would build. Each is stored xz-compressed (~6 MB -> ~0.8 MB:
a call's whole working tree, carried wheels included, travels under 64 MiB), and scripts/device_prologue.sh unpacks
whatever the carried folder holds into build/, where the device's build finds it cached. A library whose name does
not match (another nvcc, a tree changed since) is simply not found, and the device builds as before. The name does
not hash the host compiler or C library: a library built here (glibc 2.36) loads on the device (glibc 2.39), not
necessarily the other way round.

    python scripts/prebuild.py TREE... [--variants normal,timing] [--out .prebuilt]
    python scripts/prebuild.py --names TREE... [--variants normal,timing]   # each library's name, nothing built
    python scripts/prebuild.py --unpack [.prebuilt]     # on the device (scripts/device_prologue.sh does it)

TREE is ``main`` (this working tree's kernels/) or patch files joined by ``+``, applied in order to a copy of this
working tree's kernels/ (what the device call's ``git apply`` makes of them). Variants: ``normal``, ``timing``
(``KDT_E4M3_TIMING=1``), ``phase`` (``KDT_PHASE_CLOCKS=1 KDT_E4M3_TIMING=1``, as the phase-clocks runs build it).
Then carry the folder with the call: ``carry: [".whl-sglang", ".prebuilt"]``. Exits non-zero, with one line, when an
argument is wrong (a patch file missing, an ``--out`` folder holding anything but prebuilt libraries), a patch does not
apply, a build or its checks fail, or the folder passes ``--max-mib`` (what travels with a call is at most 64 MiB: the
tracked files ~21, the wheels ~27); the folder named by ``--out`` is replaced only once every library is built.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdtree_lab.kernels.build import BUILD_SWITCHES  # noqa: E402  (the switches that change a library)

VARIANTS = {
    "normal": {},
    "timing": {"KDT_E4M3_TIMING": "1"},
    "phase": {"KDT_PHASE_CLOCKS": "1", "KDT_E4M3_TIMING": "1"},
}


class PrebuildError(RuntimeError):
    """A bad argument, a patch that does not apply, a failed build, or a folder past its size limit (one line
    naming the argument, what was expected and what was found)."""


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"


def _variant_env(variant: str) -> dict[str, str]:
    """This process's environment with ``variant``'s build switches, and no other."""
    env = {k: v for k, v in os.environ.items() if k not in BUILD_SWITCHES}
    env.update(VARIANTS[variant])
    return env


def _build(tree: Path, variant: str, label: str) -> Path:
    """Build the library of ``tree`` (a folder holding kernels/ and kdtree_lab/) for ``variant``; its path."""
    env = _variant_env(variant)
    out = subprocess.run([sys.executable, "-m", "kdtree_lab", "build", "--json"], cwd=tree, env=env,
                         capture_output=True, text=True)
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        report = {}
    if out.returncode != 0 or not report.get("ok"):
        raise PrebuildError(f"{label} ({variant}): expected a library that builds and passes its checks, found exit "
                            f"{out.returncode}: {_last_line(out.stderr or out.stdout)}")
    lib = Path(report["build"]["library"])
    if not lib.with_suffix(".ptxas.log").exists():
        raise PrebuildError(f"{label} ({variant}): expected {lib.with_suffix('.ptxas.log').name} beside the library, "
                            "found none")
    return lib


def _patched_copy(patches: list[Path], into: Path) -> Path:
    """A folder with copies of this tree's kernels/ and kdtree_lab/ (the package finds its kernels beside itself),
    ``patches`` applied in order to those two folders (a patch's tests and docs are not built), and a link to data/
    (which the package reads at import)."""
    copied = ("kernels", "kdtree_lab")
    for name in copied:
        shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    (into / "data").symlink_to(ROOT / "data")
    for patch in patches:
        out = subprocess.run(["git", "apply", *(f"--include={name}/*" for name in copied), str(patch)], cwd=into,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise PrebuildError(f"{patch}: expected a patch that applies to this tree (after the ones before it), "
                                f"found: {_last_line(out.stderr)}")
    return into


@contextlib.contextmanager
def _tree_folder(tree: str):
    """The folder of TREE ``tree``: this working tree for ``main``, else a temporary patched copy (_patched_copy)."""
    if tree == "main":
        yield ROOT
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield _patched_copy([Path(p).resolve() for p in tree.split("+")], Path(tmp))


def _is_prebuilt_folder(folder: Path) -> bool:
    """Whether ``folder`` holds nothing but what prebuild writes (so replacing it loses nothing else)."""
    return folder.is_dir() and all(f.is_file() and (f.name.endswith(".so.xz") or f.name.endswith(".ptxas.log"))
                                   for f in folder.iterdir())


def _check(trees: list[str], variants: list[str], out_dir: Path | None) -> None:
    """Every argument's problem, before anything is built or removed."""
    if not trees:
        raise PrebuildError("TREE: expected one or more (main, or patch files joined by +), found none")
    if not variants or any(v not in VARIANTS for v in variants):
        raise PrebuildError(f"--variants: expected one or more of {', '.join(VARIANTS)}, found "
                            f"'{','.join(variants)}'")
    for tree in trees:
        if tree != "main":
            missing = [p for p in tree.split("+") if not Path(p).is_file()]
            if missing:
                raise PrebuildError(f"TREE {tree}: expected patch files, found no file {', '.join(missing)}")
    if out_dir is not None and out_dir.exists() and not _is_prebuilt_folder(out_dir):
        raise PrebuildError(f"--out {out_dir}: expected a new folder or one holding only prebuilt libraries "
                            "(*.so.xz, *.ptxas.log), found other files: not replaced")


def _name(tree: Path, variant: str, label: str) -> str:
    """The name the library of ``tree`` (a folder holding kernels/ and kdtree_lab/) has for ``variant``, computed in
    that tree (kdtree_lab.kernels.build.library_name), nothing built."""
    out = subprocess.run([sys.executable, "-c", "from kdtree_lab.kernels.build import library_name; "
                          "print(library_name())"], cwd=tree, env=_variant_env(variant), capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise PrebuildError(f"{label} ({variant}): expected its library's name, found exit {out.returncode}: "
                            f"{_last_line(out.stderr)}")
    return out.stdout.strip()


def names(trees: list[str], variants: list[str]) -> list[tuple[str, str, str]]:
    """(tree, variant, library file name) for every pair: which prebuilt libraries a call needs (a carry of
    `.whl-sglang` and every library built for a session can pass the 64 MiB a call takes: carry that call's)."""
    _check(trees, variants, None)
    found = []
    for tree in trees:
        with _tree_folder(tree) as folder:
            found += [(tree, variant, _name(folder, variant, f"TREE {tree}")) for variant in variants]
    return found


def prebuild(trees: list[str], variants: list[str], out_dir: Path, max_mib: float) -> list[Path]:
    """Build every (tree, variant), each library xz-compressed beside its ptxas log, into a staging folder that
    replaces ``out_dir`` once all are built and fit ``max_mib`` (a failure leaves ``out_dir`` as it was)."""
    _check(trees, variants, out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        libs = []
        for tree in trees:
            with _tree_folder(tree) as folder:
                for variant in variants:
                    lib = _build(folder, variant, f"TREE {tree}")
                    with open(lib, "rb") as src, lzma.open(stage / f"{lib.name}.xz", "wb", preset=6) as dst:
                        shutil.copyfileobj(src, dst)
                    shutil.copy2(lib.with_suffix(".ptxas.log"), stage / lib.with_suffix(".ptxas.log").name)
                    libs.append(out_dir / f"{lib.name}.xz")
                    print(f"{tree} {variant}: {lib.name}", flush=True)
        mib = sum(f.stat().st_size for f in stage.iterdir()) / 2**20
        if mib > max_mib:
            raise PrebuildError(f"--max-mib: expected at most {max_mib:g} MiB to carry, found {mib:.1f} MiB "
                                f"({len(libs)} libraries): name fewer trees or variants")
        if out_dir.exists():
            shutil.rmtree(out_dir)  # holds only prebuilt libraries (_check)
        stage.rename(out_dir)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
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
    ap.add_argument("--names", action="store_true", help="print each (tree, variant)'s library name, build nothing")
    ap.add_argument("--variants", default="normal,timing", help="comma list of normal, timing, phase")
    ap.add_argument("--out", type=Path, default=ROOT / ".prebuilt")
    ap.add_argument("--max-mib", type=float, default=14.0, help="the folder's largest size (MiB)")
    args = ap.parse_args(argv)
    if args.unpack:
        folder = Path(args.trees[0]) if args.trees else ROOT / ".prebuilt"
        if not folder.is_dir():
            print(f"prebuild: --unpack: expected a folder of prebuilt libraries, found no folder {folder}",
                  file=sys.stderr)
            return 1
        libs = unpack(folder)
        print(f"prebuilt: {len(libs)} libraries into build/ ({', '.join(p.name for p in libs) or 'none new'})")
        return 0
    variants = [v for v in args.variants.split(",") if v]
    try:
        if args.names:
            for tree, variant, name in names(args.trees, variants):
                print(f"{tree} {variant}: {name}")
            return 0
        prebuild(args.trees, variants, args.out.resolve(), args.max_mib)
    except PrebuildError as e:
        print(f"prebuild: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
