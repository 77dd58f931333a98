"""Build the CUDA verify kernel into a shared library and check what came out.

``build_library`` runs nvcc (cached under ``build/`` by a hash of the sources, flags and nvcc version).
``check_library`` then proves the result: the C ABI's symbols are exported (ELF dynamic symbol table, read
with pyelftools), there is one cubin per requested arch with HMMA (mma.sync) in its SASS (cuobjdump), and each
kernel's registers, shared memory and local memory (spills) fit the limits of sm_120 (99 KB of shared memory
per block, 64K registers per SM, no spills).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.cuda_tools import find_cuda_tool, find_nvcc
from ..core.paths import BUILD, KERNELS, kernel_sources
from .launch_plan import E4M3_CONFIGS

LAUNCHER = "kdtree_verify.cu"  # the one translation unit: it includes every kernel header
LIB_STEM = "libkdtree_verify"
DEFAULT_ARCHS = ("sm_120a", "sm_90a")
# The archs nvcc builds the library for: its sm_120 kernels' e4m3 conversions and barriers need sm_90 or later
# (sm_80 and sm_89 stop in ptxas), and these are the ones built and checked (sm_120a: the RTX cards, sm_90a: the H200).
SUPPORTED_ARCHS = ("sm_120a", "sm_120", "sm_90a", "sm_90")
REQUIRED_SYMBOLS = (
    "kdtree_verify_attn_flash_paged_cg",
    "kdtree_verify_workspace_bytes",
    "kdtree_verify_num_configs",
    "kdtree_verify_config",
    "kdtree_verify_select_config",
    "kdtree_verify_strerror",
    "kdtree_verify_phase_clocks",
    "kdtree_verify_abi_version",
    "kdtree_verify_force_config",
    "kdtree_verify_config_name",
    "kdtree_verify_config_for_pool",
    "kdtree_verify_set_fp8_math",
)
NVCC_FLAGS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC,-fvisibility=hidden", "-lineinfo",
              "--use_fast_math", "-Xptxas", "-v")


@dataclass(frozen=True)
class ArchLimits:
    """Per-block and per-SM limits a kernel must respect on an arch (bytes, registers)."""

    smem_per_block_optin: int
    smem_per_sm: int
    regs_per_sm: int
    max_regs_per_thread: int = 255


LIMITS = {
    "sm_120": ArchLimits(smem_per_block_optin=101_376, smem_per_sm=102_400, regs_per_sm=65_536),
    "sm_90": ArchLimits(smem_per_block_optin=232_448, smem_per_sm=233_472, regs_per_sm=65_536),
    "sm_80": ArchLimits(smem_per_block_optin=166_912, smem_per_sm=167_936, regs_per_sm=65_536),
}


class BuildError(RuntimeError):
    """nvcc failed, or a tool the build needs is missing."""


class CheckError(RuntimeError):
    """The built library failed a symbol, SASS or resource check; the message names arch, kernel and limit."""


@dataclass(frozen=True)
class BuildResult:
    library: Path
    archs: tuple[str, ...]
    cached: bool
    seconds: float
    nvcc_version: str
    command: list[str]
    ptxas_log: str


@dataclass
class KernelResources:
    arch: str
    kernel: str  # demangled-ish short name
    registers: int
    static_smem: int
    local_bytes: int  # local memory per thread (spills and stack arrays)
    stack: int
    hmma: int = 0  # tensor-core MMA instructions in this kernel's SASS (HMMA, QMMA: mma.sync; HGMMA: wgmma)
    hgmma: int = 0  # of which wgmma (HGMMA)
    qmma: int = 0  # of which e4m3 mma.sync (QMMA; QMMA.SF: the block-scaled form sm_120a runs at twice the rate)
    gmma_waits: int = 0  # WARPGROUP.DEPBAR (wgmma waits): one after every HGMMA means ptxas serialized them


@dataclass
class CheckReport:
    library: str
    symbols: dict[str, bool]
    cubins: dict[str, int]  # arch -> cubins found
    resources: list[KernelResources]
    configs: list[dict]  # kdt_config rows + per-arch eligibility
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _arch_family(arch: str) -> str:
    return re.sub(r"[a-z]$", "", arch)


def _gencode(arch: str) -> list[str]:
    num = arch.removeprefix("sm_")
    return ["-gencode", f"arch=compute_{num},code=sm_{num}"]


def nvcc_command(nvcc: str, archs: tuple[str, ...] | list[str], out: Path, kernels: Path = KERNELS,
                 debug: tuple[str, ...] = ()) -> list[str]:
    """The library's nvcc command: kernels/kdtree_verify.cu of the tree ``kernels`` (default this one's) for ``archs``
    into the shared library ``out``, with ``debug`` defines (-DKDT_DEBUG_WAITS, -DKDT_E4M3_TIMING_PROXY,
    -DKDT_PHASE_CLOCKS)."""
    # the launcher may choose the wgmma kernel automatically only when its sm_90a code is in the library
    defines = (["-DKDT_SM90A_BUILT"] if "sm_90a" in archs else []) + list(debug)
    return [nvcc, *NVCC_FLAGS, *defines, *[x for a in archs for x in _gencode(a)], "-o", str(out),
            str(kernels / LAUNCHER)]


def _required_nvcc() -> str:
    """The nvcc the build uses (find_nvcc), or BuildError naming how to provide one."""
    nvcc = find_nvcc()
    if not nvcc:
        raise BuildError("nvcc not found: set CUDA_HOME or put nvcc on PATH (kdtree-lab doctor shows what is found)")
    return nvcc


def _nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return m.group(2) if m else out.strip().splitlines()[-1]


# The environment's development switches that change a library (its own cached file): each switch (=1) -> the define
# it adds, in the order the build passes them (debug_defines; the file name hashes them). scripts/prebuild.py clears
# them all before it sets a variant's.
BUILD_SWITCHES = {"KDT_DEBUG_WAITS": "-DKDT_DEBUG_WAITS", "KDT_E4M3_TIMING": "-DKDT_E4M3_TIMING_PROXY",
                  "KDT_PHASE_CLOCKS": "-DKDT_PHASE_CLOCKS"}


def _switched_on(switch: str) -> bool:
    """A development switch of BUILD_SWITCHES (or another KDT_ flag) is on when the environment sets it to 1."""
    return os.environ.get(switch) == "1"


def debug_waits() -> bool:
    """KDT_DEBUG_WAITS=1 in the environment: build the debug library, whose every mbarrier wait traps after 2 s,
    naming itself (kernels/common/ptx.cuh)."""
    return _switched_on("KDT_DEBUG_WAITS")


def e4m3_timing_proxy() -> bool:
    """KDT_E4M3_TIMING=1 in the environment: build the timing library, whose e4m3 MMAs are each one f16 m16n8k16 on
    the same registers (wrong results: for timing only). A GPU without e4m3 tensor cores (the H200) then issues what
    sm_120a issues, one MMA of one MMA's cost per e4m3 MMA, instead of its emulation (docs/performance.md, "e4m3
    tensor cores on sm_120"). Its own library file; parity refuses to run on it."""
    return _switched_on("KDT_E4M3_TIMING")


def carveout_switch() -> int | None:
    """KDT_CARVEOUT=<percent 0..100> in the environment: the preferred shared-memory carveout the library sets for every
    kernel it launches (kernels/kdtree_verify.cu, apply_carveout_switch; 100: an sm_120 card's ~28 KB of L1 on an
    H200), else None. A timing condition, not a build: results record it."""
    v = os.environ.get("KDT_CARVEOUT")
    return int(v) if v is not None and v.isascii() and v.isdigit() and int(v) <= 100 else None  # as the library


def timing_conditions() -> dict:
    """What a timing result records of the environment's timing switches: ``timing_library`` (True: e4m3 MMAs issued
    as sm_120a issues them, values wrong) and ``carveout`` (KDT_CARVEOUT's percentage, None: the driver's)."""
    return {"timing_library": e4m3_timing_proxy(), "carveout": carveout_switch()}


def phase_clocks() -> bool:
    """KDT_PHASE_CLOCKS=1 in the environment: build the phase library, whose sm_120 e4m3 forms, bf16 role split (the
    64-row e4m3 form's draft block) and combine stamp each warp's progress through its CTA's work (kernels/common/phase.cuh; kdtree_lab.checks.phase_clocks reads it).
    Its own library file; its times are its own (each stamp is two stores)."""
    return _switched_on("KDT_PHASE_CLOCKS")


def debug_defines() -> tuple[str, ...]:
    """The defines the environment's development switches add to the library's build (its own cached file)."""
    return tuple(define for switch, define in BUILD_SWITCHES.items() if _switched_on(switch))


# Configurations whose arithmetic an arch lacks and the library emulates there (kernels/common/ptx.cuh, mma_e4m3):
# they run on that arch for correctness, so their spills are reported there, not refused; on the arch they are for
# every rule holds.
EMULATED = {"sm_90a": tuple(sorted(E4M3_CONFIGS))}


def arch_problem(archs: tuple[str, ...] | list[str]) -> str | None:
    """Why ``archs`` cannot be built (one line naming them), or None: at least one, each in SUPPORTED_ARCHS."""
    bad = [a for a in archs if a not in SUPPORTED_ARCHS]
    if not archs or bad:
        found = ", ".join(repr(a) for a in bad) if bad else "none"
        return (f"archs: expected one or more of {', '.join(SUPPORTED_ARCHS)} (the library needs sm_90 or later: "
                f"sm_80 and sm_89 lack PTX it uses), found {found}")
    return None


def library_name(archs: tuple[str, ...] | list[str] = DEFAULT_ARCHS, nvcc_version: str | None = None) -> str:
    """The file name build_library gives the library of ``archs`` here: ``libkdtree_verify-<hash>.so``, the hash of
    the kernel sources, the flags, the build switches set in this environment (debug_defines), the archs and nvcc's
    version (asked of the nvcc found where not given), so a library built elsewhere from the same tree with the same
    nvcc has this name (scripts/prebuild.py --names)."""
    if nvcc_version is None:
        nvcc_version = _nvcc_version(_required_nvcc())
    h = hashlib.sha256()
    for path in kernel_sources():
        h.update(str(path.relative_to(KERNELS)).encode())
        h.update(path.read_bytes())
    h.update(" ".join(NVCC_FLAGS + debug_defines() + tuple(archs) + (nvcc_version,)).encode())
    return f"{LIB_STEM}-{h.hexdigest()[:16]}.so"


def build_library(archs: tuple[str, ...] | list[str] = DEFAULT_ARCHS, out_dir: Path = BUILD, force: bool = False,
                  progress: bool = True) -> BuildResult:
    """Compile kernels/kdtree_verify.cu for ``archs`` into ``build/`` under library_name (cached)."""
    nvcc = _required_nvcc()
    archs = tuple(archs)
    problem = arch_problem(archs)
    if problem:
        raise BuildError(problem)
    version = _nvcc_version(nvcc)
    debug = debug_defines()
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / library_name(archs, version)
    log_path = lib.with_suffix(".ptxas.log")
    cmd = nvcc_command(nvcc, archs, lib, debug=debug)
    if lib.exists() and log_path.exists() and not force:
        return BuildResult(lib, archs, True, 0.0, version, cmd, log_path.read_text())
    partial = lib.with_name(f"{lib.name}.{os.getpid()}.partial")  # nvcc writes here; renamed to lib when whole
    run = nvcc_command(nvcc, archs, partial, debug=debug)  # cmd with the partial file as its output
    t0 = time.perf_counter()
    from ..core.display import headless

    import sys

    words = f"nvcc: building {lib.name} for {', '.join(archs)}"
    if progress and not headless() and sys.stderr.isatty():  # a spinner in a terminal (in a notebook: a widget)
        from ..core.display import console

        with console(stderr=True).status(words):
            proc = subprocess.run(run, capture_output=True, text=True)
    else:  # the line once: in a headless notebook's output, or on the stderr of a command in a log or a pipe
        if progress:
            print(words, flush=True, file=sys.stdout if headless() else sys.stderr)
        proc = subprocess.run(run, capture_output=True, text=True)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BuildError(f"nvcc failed (exit {proc.returncode}) for {', '.join(archs)}:\n{proc.stderr[-4000:]}")
    # the library and then its log appear by rename, whole: a process that finds both (the cache test above) never
    # loads a library another process is still writing (pytest -n, parallel sanitizers)
    os.replace(partial, lib)
    log_partial = log_path.with_name(f"{log_path.name}.{os.getpid()}")
    log_partial.write_text(proc.stderr)
    os.replace(log_partial, log_path)
    return BuildResult(lib, archs, False, time.perf_counter() - t0, version, cmd, proc.stderr)


def exported_symbols(library: Path) -> set[str]:
    """Names in the library's ELF dynamic symbol table that are defined functions."""
    from elftools.elf.elffile import ELFFile

    with open(library, "rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is None:
            return set()
        return {s.name for s in dynsym.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF"}


def _short(kernel: str) -> str:
    """A mangled kernel name as the configuration table names it: int template arguments, and a trailing bool
    shown when true (``..._kernelILi32ELi2ELb1EEvNS_6ParamsE`` -> ``verify_sm120_kernel<32,2,true>``)."""
    m = re.search(r"(verify_[a-z0-9_]+?_kernel)(I((?:Li\d+E)+)(?:Lb([01])E)?E)?", kernel)
    if not m:
        return _unqualified(kernel)
    if not m.group(2):
        return m.group(1)
    args = re.findall(r"Li(\d+)E", m.group(3)) + (["true"] if m.group(4) == "1" else [])
    return f"{m.group(1)}<{','.join(args)}>"


def _unqualified(name: str) -> str:
    """The last identifier of an Itanium-mangled nested name (``_ZN3kdt15mma_peak_kernelEiPf`` ->
    ``mma_peak_kernel``); any other name as it is."""
    if not name.startswith("_ZN"):
        return name
    parts, i = [], 3
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        length = int(name[i:j])
        parts.append(name[j:j + length])
        i = j + length
    return parts[-1] if parts and parts[-1] else name


def _cuobjdump(args: list[str]) -> str:
    tool = find_cuda_tool("cuobjdump")
    if not tool:
        raise BuildError("cuobjdump not found (it ships in the triton wheel: pip install triton)")
    proc = subprocess.run([tool, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CheckError(f"cuobjdump {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def kernel_resources(library: Path) -> list[KernelResources]:
    """Registers, static shared memory, local memory and stack per kernel per arch, plus HMMA counts."""
    out = _cuobjdump(["--dump-resource-usage", str(library)])
    res: list[KernelResources] = []
    arch = None
    for line in out.splitlines():
        m = re.match(r"\s*arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", line)
        if m and arch:
            res.append(KernelResources(arch, _short(name), int(m.group(1)), int(m.group(3)), int(m.group(4)),
                                       int(m.group(2))))
    for arch_name in sorted({r.arch for r in res}):
        sass = _cuobjdump(["--dump-sass", "-arch", arch_name, str(library)])
        current = None
        counts: dict[str, list[int]] = {}  # kernel -> [HMMA, QMMA or HGMMA, HGMMA, WARPGROUP.DEPBAR, QMMA]
        for line in sass.splitlines():
            m = re.match(r"\s*Function : (\S+)", line)
            if m:
                current = _short(m.group(1))
                counts.setdefault(current, [0, 0, 0, 0])
            elif current:
                c = counts[current]
                c[0] += "HMMA" in line or "HGMMA" in line or "QMMA" in line
                c[1] += "HGMMA" in line
                c[2] += "WARPGROUP.DEPBAR" in line
                c[3] += "QMMA" in line
        for r in res:
            if r.arch == arch_name:
                r.hmma, r.hgmma, r.gmma_waits, r.qmma = counts.get(r.kernel, [0, 0, 0, 0])
    return res


def library_configs(library: Path) -> list[dict]:
    """The kernel configurations compiled in (kdtree_verify_config), via ctypes (no GPU needed); a fresh copy."""
    return [dict(c) for c in _library_configs(Path(library))]


@functools.lru_cache(maxsize=8)
def _library_configs(library: Path) -> tuple[dict, ...]:
    """The kernel configurations compiled in, via the C ABI (no GPU needed)."""
    from .abi import configs, open_cdll

    try:
        return tuple(configs(open_cdll(library)))
    except RuntimeError as exc:
        raise CheckError(str(exc)) from None


def resource_problems(resources: list[KernelResources], configs: list[dict],
                      archs: tuple[str, ...] | list[str]) -> list[str]:
    """Resource checks per arch: at least one configuration within the arch's shared memory per block, and for
    every configuration that fits (the others can never launch there): HMMA in its SASS, no local memory
    (spills), registers x threads within one SM. Marks each config's ``fits`` per arch."""
    problems: list[str] = []
    by_kernel = {c["kernel"]: c for c in configs}
    for a in archs:
        limits = LIMITS.get(_arch_family(a))
        kernels = [r for r in resources if r.arch == a]
        if not kernels or limits is None:
            continue
        eligible = []
        for r in kernels:
            cfg = by_kernel.get(r.kernel)
            threads = cfg["threads"] if cfg else 128
            dyn = cfg["dynamic_smem"] if cfg else 0
            if cfg:
                fits = dyn <= limits.smem_per_block_optin and dyn + r.static_smem <= limits.smem_per_sm
                cfg.setdefault("fits", {})[a] = fits
                if not fits:
                    continue  # this configuration can never launch on this arch: nothing else to check there
                eligible.append(r.kernel)
            if cfg and r.hmma == 0:
                problems.append(f"{a} {r.kernel}: no HMMA (mma.sync) instruction in its SASS")
            if r.hgmma >= 8 and 2 * r.gmma_waits >= r.hgmma:
                problems.append(f"{a} {r.kernel}: {r.gmma_waits} wgmma waits for {r.hgmma} HGMMA (ptxas serialized "
                                f"the wgmma pipeline: its C7514 warning in the ptxas log says why)")
            # a KDT_DEBUG_WAITS build's stuck-wait printf takes a stack frame; spills (local memory) still count,
            # except where the arch emulates the kernel's arithmetic (EMULATED)
            if (r.local_bytes or (r.stack and not debug_waits())) and r.kernel not in EMULATED.get(a, ()):
                problems.append(f"{a} {r.kernel}: {r.local_bytes} B local memory / {r.stack} B stack per thread "
                                f"(limit 0: spills)")
            if r.registers * threads > limits.regs_per_sm:
                problems.append(f"{a} {r.kernel}: {r.registers} registers x {threads} threads = "
                                f"{r.registers * threads} > {limits.regs_per_sm} per SM (not even 1 CTA per SM)")
        if configs and not eligible:
            problems.append(f"{a}: no verify kernel configuration fits {limits.smem_per_block_optin} B of "
                            f"shared memory per block")
    return problems


HOPPER_ONLY = "Hopper-only (sm_90a wgmma): no body for this arch, an empty stub"


def resource_rows(report: CheckReport) -> list[dict]:
    """The per-kernel resource table (notebook 02): every kernel of every cubin, and a note on a Hopper-only
    configuration (arch 90, its body under ``__CUDA_ARCH_FEAT_SM90_ALL``) in another arch's cubin, which is an empty
    stub there: its few registers are not the kernel's."""
    hopper = {c["kernel"] for c in report.configs if c.get("arch") == 90}
    return [vars(r) | {"note": HOPPER_ONLY if r.kernel in hopper and not r.arch.startswith("sm_90") else ""}
            for r in report.resources]


def check_library(library: Path, archs: tuple[str, ...] | list[str] = DEFAULT_ARCHS) -> CheckReport:
    """Symbol, cubin/SASS and resource checks; ``problems`` names the arch, kernel and limit of each failure."""
    library = Path(library)
    problems: list[str] = []
    syms = exported_symbols(library)
    symbols = {s: s in syms for s in REQUIRED_SYMBOLS}
    problems += [f"symbol {s} is not exported by {library.name}" for s, ok in symbols.items() if not ok]
    elf_list = _cuobjdump(["--list-elf", str(library)])
    cubins = {a: len(re.findall(rf"\.{a}\.cubin", elf_list)) for a in archs}
    problems += [f"{a}: no cubin in {library.name}" for a, n in cubins.items() if n == 0]
    resources = kernel_resources(library)
    configs = library_configs(library) if all(symbols.values()) else []
    problems += resource_problems(resources, configs, archs)
    return CheckReport(str(library), symbols, cubins, resources, configs, problems)
