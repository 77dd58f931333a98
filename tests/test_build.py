"""nvcc builds for sm_120a and sm_90a pass the symbol, SASS and resource checks; the checks can fail."""

import subprocess

import pytest

from kdtree_lab.core.paths import kernel_sources
from kdtree_lab.kernels import build
from kdtree_lab.kernels.build import KernelResources, resource_problems


@pytest.fixture(scope="module")
def built():
    result = build.build_library(("sm_120a", "sm_90a"), progress=False)
    return result, build.check_library(result.library, ("sm_120a", "sm_90a"))


def test_build_passes_checks(built):
    result, report = built
    assert report.ok, report.problems
    assert all(report.symbols.values())
    assert report.cubins["sm_120a"] >= 1 and report.cubins["sm_90a"] >= 1
    sm120 = [r for r in report.resources if r.kernel == "verify_sm120_kernel<32,2>"]  # an mma.sync kernel: both archs
    assert {r.arch for r in sm120} == {"sm_120a", "sm_90a"}
    assert all(r.hmma > 0 and r.local_bytes == 0 for r in sm120)
    fits = {c["block_m"]: c["fits"] for c in report.configs}
    assert any(f["sm_120a"] for f in fits.values()), "a configuration must fit sm_120's 99 KB"


def test_what_sm_120_selects_fits_it_in_the_sm_120a_build(built):
    """Every configuration the launcher may select on a 99 KB GPU (both sm_120 kernels, per shape) is in the sm_120a
    cubin with tensor-core MMAs, no local memory and within sm_120's shared memory and registers."""
    from kdtree_lab.kernels.launch_plan import AUTO_CONFIGS

    _, report = built
    sm120 = {a.config.name for a in AUTO_CONFIGS if not a.sm90a and a.smem <= 101_376}
    assert {"verify_sm120_kernel<32,2>", "verify_sm120_roles_kernel<64>"} <= sm120
    configs = {c["kernel"]: c for c in report.configs}
    for name in sm120:
        assert configs[name]["fits"]["sm_120a"], name
        res = [r for r in report.resources if r.arch == "sm_120a" and r.kernel == name]
        assert len(res) == 1 and res[0].hmma > 0 and res[0].local_bytes == 0, (name, res)


MANGLED = {"verify_sm120_e4m3_kernel<64>": "_ZN3kdt24verify_sm120_e4m3_kernelILi64EEEvNS_6ParamsE",
           "verify_sm120_e4m3_32_kernel": "_ZN3kdt27verify_sm120_e4m3_32_kernelENS_6ParamsE"}


@pytest.mark.parametrize("name", sorted(MANGLED))
def test_the_e4m3_configurations_run_block_scaled_e4m3_mmas_in_the_sm_120a_build(built, name):
    """What a 99 KB GPU runs for an fp8 pool (automatic fp8 math): the e4m3 tensor-core configurations (64-row CTAs
    above 32 rows, 32-row CTAs for the rest), in the sm_120a cubin with block-scaled e4m3 MMAs only (QMMA.SF: twice
    the rate of the plain form on GB202 with fp32 accumulation) beside the draft block's bf16 HMMAs, no local memory,
    within sm_120's limits; on sm_90a (no e4m3 tensor cores) they are emulated with f16 HMMAs and their spills are
    reported, not refused (build.EMULATED)."""
    from kdtree_lab.kernels import build as b
    from kdtree_lab.kernels.launch_plan import AUTO_CONFIGS, E4M3_CONFIGS

    _, report = built
    assert {a.fp8_e4m3.name for a in AUTO_CONFIGS if a.e4m3_default} == set(MANGLED) == set(E4M3_CONFIGS)
    assert {c["kernel"]: c for c in report.configs}[name]["fits"]["sm_120a"]
    res = {r.arch: r for r in report.resources if r.kernel == name}
    assert res["sm_120a"].local_bytes == 0 and res["sm_120a"].stack == 0, res["sm_120a"]
    assert res["sm_120a"].qmma > 0 and res["sm_120a"].hmma > 0  # QMMA prefix splits, HMMA draft block
    assert res["sm_90a"].qmma == 0 and name in b.EMULATED["sm_90a"]
    sass = b._cuobjdump(["--dump-sass", "-arch", "sm_120a", "-fun", MANGLED[name], str(report.library)])
    qmma = [line for line in sass.splitlines() if "QMMA" in line]
    assert qmma and all("QMMA.SF.16832.F32.E4M3.E4M3" in line for line in qmma), qmma[:3]


def test_build_is_cached(built):
    again = build.build_library(("sm_120a", "sm_90a"), progress=False)
    assert again.cached and again.library == built[0].library


def test_resource_checks_name_arch_kernel_and_limit():
    cfgs = [{"index": 0, "kernel": "verify_split_kernel<64,3>", "block_m": 64, "stages": 3, "threads": 512,
             "dynamic_smem": 147_200},
            {"index": 1, "kernel": "verify_split_kernel<32,2>", "block_m": 32, "stages": 2, "threads": 512,
             "dynamic_smem": 82_944}]
    res = [KernelResources("sm_120a", "verify_split_kernel<64,3>", 255, 1024, 16, 0, hmma=0),
           KernelResources("sm_120a", "verify_split_kernel<32,2>", 255, 1024, 16, 0, hmma=0)]
    text = "\n".join(resource_problems(res, cfgs, ["sm_120a"]))
    # the 147 KB config cannot launch on sm_120, so only the 83 KB one is checked there
    assert "verify_split_kernel<64,3>" not in text
    assert "sm_120a verify_split_kernel<32,2>: no HMMA" in text
    assert "16 B local memory" in text
    assert "255 registers x 512 threads" in text
    assert [c["fits"]["sm_120a"] for c in cfgs] == [False, True]
    # a wgmma kernel whose every HGMMA is followed by a wait: ptxas serialized the pipeline
    wg = [{"index": 0, "kernel": "verify_wgmma_v5_kernel<64>", "block_m": 64, "stages": 4, "threads": 256,
           "dynamic_smem": 231_424}]
    serialized = KernelResources("sm_90a", "verify_wgmma_v5_kernel<64>", 255, 1024, 0, 0, hmma=82, hgmma=82,
                                 gmma_waits=82)
    assert "82 wgmma waits for 82 HGMMA" in "\n".join(resource_problems([serialized], wg, ["sm_90a"]))
    pipelined = KernelResources("sm_90a", "verify_wgmma_v5_kernel<64>", 192, 1024, 0, 0, hmma=120, hgmma=120,
                                gmma_waits=10)
    assert resource_problems([pipelined], [dict(wg[0])], ["sm_90a"]) == []
    too_big = [dict(cfgs[0])]
    assert "sm_120a: no verify kernel configuration fits 101376 B" in "\n".join(
        resource_problems(res[:1], too_big, ["sm_120a"]))


def test_missing_symbol_is_reported(tmp_path):
    src = tmp_path / "empty.cu"
    src.write_text("extern \"C\" int unrelated(void) { return 0; }\n")
    import subprocess

    lib = tmp_path / "libempty.so"
    subprocess.run([build.find_nvcc(), "-shared", "-Xcompiler", "-fPIC", "-gencode",
                    "arch=compute_120a,code=sm_120a", "-o", str(lib), str(src)], check=True)
    report = build.check_library(lib, ("sm_120a",))
    assert not report.ok
    assert any("kdtree_verify_attn_flash_paged_cg is not exported" in p for p in report.problems)


def test_bad_arch_name():
    with pytest.raises(build.BuildError, match="sm_120a"):
        build.build_library(("compute_120",), progress=False)


@pytest.mark.parametrize("header", [p for p in kernel_sources() if p.suffix in (".cuh", ".h")],
                         ids=lambda p: str(p.relative_to(p.parents[1])) if p.parent.name != "kernels" else p.name)
def test_every_kernel_header_compiles_on_its_own(header, tmp_path):
    """Each header includes what it uses: a translation unit of that header alone compiles (sm_90a for the
    wgmma kernel, whose instructions only sm_90a has; sm_120a for the rest)."""
    arch = "sm_90a" if header.parent.name == "sm90" else "sm_120a"
    unit = tmp_path / "unit.cu"
    unit.write_text(f'#include "{header}"\n')
    out = subprocess.run([build.find_nvcc(), "-std=c++17", "-c", f"-arch={arch}", "-o", str(tmp_path / "unit.o"),
                          str(unit)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_kernel_names_read_back_as_the_configuration_table_names_them():
    """The SASS and resource reports find each configuration by its table name, underscores in it included."""
    from kdtree_lab.kernels.build import _short

    assert _short("_ZN3kdt22verify_wgmma_v5_kernelILi64EEEvNS_6ParamsE") == "verify_wgmma_v5_kernel<64>"
    assert _short("_ZN3kdt19verify_sm120_kernelILi32ELi2ELb1EEEvNS_6ParamsE") == "verify_sm120_kernel<32,2,true>"
    assert _short("_ZN3kdt19verify_wgmma_kernelILi64ELi2ELb0EEEvNS_6ParamsE") == "verify_wgmma_kernel<64,2>"
    assert _short("_ZN3kdt15mma_peak_kernelEiPf") == "mma_peak_kernel"  # demangled, as build prints it


# (switch, what only its library holds): KDT_DEBUG_WAITS=1, whose mbarrier waits print the stuck barrier and trap
# after 2 s (its checks pass with the printf's stack frame allowed); KDT_PHASE_CLOCKS=1, whose e4m3 forms and combine
# stamp their phases (kernels/common/phase.cuh; its sm_120a checks pass: no spills)
DEV_BUILDS = [("KDT_DEBUG_WAITS", b"mbarrier wait stuck 2 s"), ("KDT_PHASE_CLOCKS", b"_ZN3kdt7g_phaseE")]


@pytest.mark.parametrize("switch, marker", DEV_BUILDS, ids=[s for s, _ in DEV_BUILDS])
def test_a_development_build_is_its_own_library_and_the_default_has_none_of_it(built, monkeypatch, switch, marker):
    """SWITCH=1 builds a separate library (its own hash) holding what the default build has none of; the build's
    command carries -DSWITCH; its checks pass."""
    assert marker not in built[0].library.read_bytes()
    monkeypatch.setenv(switch, "1")
    dev = build.build_library(("sm_120a",), progress=False)
    assert dev.library != built[0].library and marker in dev.library.read_bytes()
    assert f"-D{switch}" in dev.command
    report = build.check_library(dev.library, ("sm_120a",))
    assert report.ok, report.problems


def test_the_carveout_switch_is_a_timing_condition_the_results_record_not_a_build(built, monkeypatch):
    """KDT_CARVEOUT=<0..100> is read by the library at run time (the same library file) and recorded by the
    benchmark; anything else reads as unset, as the library ignores it."""
    monkeypatch.setenv("KDT_CARVEOUT", "100")
    assert build.carveout_switch() == 100 and build.build_library(("sm_120a", "sm_90a"), progress=False).library == \
        built[0].library
    assert b"KDT_CARVEOUT" in built[0].library.read_bytes()
    assert build.timing_conditions()["carveout"] == 100  # what every timing result records
    for bad in ("101", "-1", "max", ""):
        monkeypatch.setenv("KDT_CARVEOUT", bad)
        assert build.carveout_switch() is None, bad
    monkeypatch.delenv("KDT_CARVEOUT")
    assert build.carveout_switch() is None


def test_the_default_librarys_phase_clocks_answer_none(built):
    """The default library's kdtree_verify_phase_clocks answers 0, no buffer (checked on a CPU: it touches no
    device)."""
    from kdtree_lab.kernels import loader

    assert loader.open_library(built[0].library).lib.kdtree_verify_phase_clocks(None, 0, 0) == 0


def test_the_resource_table_says_a_hopper_kernel_has_no_sm_120a_body():
    """sm_120a's cubin holds the wgmma kernels as empty stubs (4 registers): their rows say so, sm_90a's do not."""
    cfgs = [{"kernel": "verify_wgmma_v5_kernel<64>", "arch": 90}, {"kernel": "verify_sm120_kernel<32,2>", "arch": 0}]
    res = [KernelResources("sm_120a", "verify_wgmma_v5_kernel<64>", 4, 0, 0, 0),
           KernelResources("sm_90a", "verify_wgmma_v5_kernel<64>", 168, 1024, 0, 0, hmma=82, hgmma=82),
           KernelResources("sm_120a", "verify_sm120_kernel<32,2>", 232, 0, 0, 0, hmma=640)]
    rows = build.resource_rows(build.CheckReport("lib.so", {}, {}, res, cfgs))
    assert [r["note"] for r in rows] == [build.HOPPER_ONLY, "", ""]
    assert rows[0]["registers"] == 4 and "no body for this arch" in rows[0]["note"]
