"""The C ABI refuses bad input with an error code before touching memory or the GPU (runs on a CPU)."""


import re
from pathlib import Path

import pytest

from kdtree_lab.core.dtypes import KV_DTYPES
from kdtree_lab.kernels import abi, build, launch_plan, loader
from kdtree_lab.kernels.impls import IMPLS
from kdtree_lab.kernels.triton_verify import workspace_bytes as triton_workspace_bytes

FAKE = 0x10000  # an aligned address that is never dereferenced: validation fails first


@pytest.fixture(scope="module")
def lib():
    result = build.build_library(("sm_120a", "sm_90a"), progress=False)
    return loader.open_library(result.library)


def _call(lib, **over):
    args = dict(q=FAKE, q_st=8 * 576, q_sh=576, kx=FAKE, kx_s=576, vx=FAKE, vx_s=512, o=FAKE, o_st=8 * 512,
                o_sh=512, kb=FAKE, kb_s=576, pool=100, kv_dtype=0, qo=FAKE, qo64=0, kv_indptr=FAKE,
                kv_indices=FAKE, mask=None, mask_indptr=FAKE, bs=2, n=4, h=8, nsplit=4, sm=0.07, ks=1.0, vs=1.0,
                ws=FAKE, ws_bytes=1 << 40, stream=None)
    args.update(over)
    return lib.lib.kdtree_verify_attn_flash_paged_cg(*args.values())


def test_abi_version_and_strerror(lib):
    assert lib.lib.kdtree_verify_abi_version() == abi.ABI_VERSION
    assert "fp8" in lib.strerror(6)
    assert lib.strerror(999) == "unknown kdtree-lab status"


def test_workspace_bytes_agree_with_the_python_formula(lib):
    """The C ABI, the budget calculator and the Triton twin size the workspace alike."""
    # N x H a multiple of the Q pass's 64-row padding, and not: (3, 4, 8, 1) pads 32 rows, (2, 5, 16, 2) 80, (7, 3, 3, 5) 9
    for args in [(1, 16, 8, 16), (8, 16, 8, 16), (48, 4, 16, 3), (1, 64, 128, 132), (3, 4, 8, 1), (2, 5, 16, 2),
                 (7, 3, 3, 5)]:
        assert lib.workspace_bytes(*args) == launch_plan.workspace_bytes(*args) == triton_workspace_bytes(*args)
    assert lib.workspace_bytes(0, 4, 8, 4) == 0


@pytest.mark.parametrize("over,code", [
    ({"q": None}, 1), ({"kv_indices": None}, 1), ({"ws": None}, 1),
    ({"mask": FAKE, "mask_indptr": None}, 1),
    ({"bs": 0}, 2), ({"n": 0}, 2), ({"h": 0}, 2), ({"nsplit": 0}, 2), ({"nsplit": 10_000}, 2),
    ({"kv_dtype": 7}, 4), ({"kv_dtype": 1, "kb_s": 584}, 3),  # an e4m3 pool's rows: 16-byte aligned (584 B is not)
    ({"q": FAKE + 2}, 3), ({"q_sh": 577}, 3), ({"kb_s": 512}, 3),
    ({"ws_bytes": 1024}, 5), ({"ws": FAKE + 4}, 5),
])
def test_bad_input_returns_a_status_not_a_crash(lib, over, code):
    assert _call(lib, **over) == code, lib.strerror(code)


def test_config_selection(lib):
    cfgs = lib.configs()

    def sel(smem, cc, sms=132, bs=1, n=4, h=8):
        return lib.lib.kdtree_verify_select_config(smem, cc, sms, bs, n, h)

    v5 = [c["kernel"] for c in cfgs].index(loader.CUDA_IMPLS["cuda_wgmma_v5"])
    assert "sm_90a" in lib.archs and sel(232_448, 90) == v5  # H200 with sm_90a code: the wgmma kernel v5
    # sm_120's 99 KB; a 9.x part with too little shared memory for v5; B200 (10.0) and A100 (8.0), Hopper-sized
    # shared memory but no wgmma: the sm_120 configurations, per shape
    for cc, smem in ((120, 101_376), (90, 101_376), (100, 232_448), (80, 232_448)):
        idx = sel(smem, cc, sms=188)
        assert idx >= 0 and cfgs[idx]["dynamic_smem"] <= 101_376
        assert cfgs[idx]["kernel"] == loader.CUDA_IMPLS["cuda_sm120"]  # 32 rows: the first sm_120 kernel
        for bs, n, h in ((1, 16, 8), (8, 33, 1), (48, 64, 128)):  # above 32 rows: its second generation
            assert cfgs[sel(smem, cc, 188, bs, n, h)]["kernel"] == loader.CUDA_IMPLS["cuda_sm120_roles"]
    assert cfgs[sel(99_431, 120, 188, 1, 16, 8)]["kernel"] == loader.CUDA_IMPLS["cuda_sm120"]  # it does not fit
    # nor where its own 99,432 B fit and its e4m3 variant's do not: a chosen configuration's fp8 variants launch too
    e4m3 = cfgs[[c["kernel"] for c in cfgs].index(loader.CUDA_IMPLS["cuda_sm120_e4m3"])]["dynamic_smem"]
    assert cfgs[sel(e4m3 - 1, 120, 188, 1, 16, 8)]["kernel"] == loader.CUDA_IMPLS["cuda_sm120"]
    assert cfgs[sel(e4m3, 120, 188, 1, 16, 8)]["kernel"] == loader.CUDA_IMPLS["cuda_sm120_roles"]
    assert sel(1000, 120) == -1


def test_selection_follows_the_declared_properties(lib):
    """Automatic selection is derived from each configuration's fields: over a grid of devices and shapes the
    library's choice is the eligible configuration of highest priority, and nothing is chosen that its arch, shared
    memory or row range excludes."""
    cfgs = lib.configs()

    def needs(c):  # its own shared memory and that of each pool variant it may switch to
        return max([c["dynamic_smem"]] + [cfgs[v]["dynamic_smem"] for v in (c["fp8_config"], c["fp8_e4m3_config"])
                                          if 0 <= v < len(cfgs)])

    for smem, cc, sms in [(232_448, 90, 132), (101_376, 120, 188), (101_376, 120, 170), (232_448, 80, 108),
                          (100_000, 120, 188)]:
        for bs in (1, 8, 48):
            for n in (1, 4, 16, 64):
                for h in (8, 16, 128):
                    idx = lib.lib.kdtree_verify_select_config(smem, cc, sms, bs, n, h)
                    ok = [c for c in cfgs if c["auto_priority"] > 0 and needs(c) <= smem
                          and (c["arch"] == 0 or cc // 10 == 9) and c["min_rows"] <= n * h
                          and (c["max_rows"] == 0 or n * h <= c["max_rows"])]
                    assert ok, f"no configuration serves {n} x {h} rows on ({smem} B, cc {cc})"
                    assert idx >= 0 and cfgs[idx] in ok
                    assert cfgs[idx]["auto_priority"] == max(c["auto_priority"] for c in ok)


def test_every_configuration_names_what_it_runs_over_each_pool(lib):
    """One home for the pool mapping: bf16 runs the configuration itself, fp8 the e4m3 variant of the sm_120 kernel
    or of v4 (the launcher calls the same function) under exact fp8 math, the sm_120 configurations' e4m3
    tensor-core configurations (the 32-row form for the first kernel, the 64-row one for its second generation)
    under e4m3 and automatic math (v4 and v5 have none: exact there too); every bf16 configuration has an fp8 path (-KDT_ERR_UNSUPPORTED is for one without); a forced variant
    refuses bf16 (the refusal: -KDT_ERR_BAD_DTYPE, and KernelCallError naming the configuration in Python)."""
    names = [c["kernel"] for c in lib.configs()]
    impl = loader.CUDA_IMPLS
    for mode in ("auto", "e4m3"):
        with loader.fp8_math_mode(mode):
            for sm120 in ("cuda_sm120", "cuda_sm120_roles"):
                got = lib.lib.kdtree_verify_config_for_pool(names.index(impl[sm120]), 1)
                want = "cuda_sm120_e4m3_32" if sm120 == "cuda_sm120" else "cuda_sm120_e4m3"
                assert names[got] == impl[want], (mode, sm120)  # automatic math: e4m3 at every row count
            assert names[lib.lib.kdtree_verify_config_for_pool(names.index(impl["cuda_wgmma_v5"]), 1)] == \
                impl["cuda_wgmma_fp8"]
    assert lib.lib.kdtree_verify_set_fp8_math(7) == -2  # unknown mode: refused, the mode kept
    with loader.fp8_math_mode("exact"):
        run = {n: {kv: lib.lib.kdtree_verify_config_for_pool(i, d.code) for kv, d in KV_DTYPES.items()}
               for i, n in enumerate(names)}
    assert names[run[impl["cuda_sm120"]]["fp8"]] == impl["cuda_sm120_fp8"]
    assert names[run[impl["cuda_sm120_roles"]]["fp8"]] == impl["cuda_sm120_fp8"]
    assert names[run[impl["cuda_wgmma"]]["fp8"]] == impl["cuda_wgmma_fp8"]
    assert names[run[impl["cuda_wgmma_v5"]]["fp8"]] == impl["cuda_wgmma_fp8"]  # v5 has no e4m3 variant of its own
    for variant in ("cuda_sm120_fp8", "cuda_wgmma_fp8", "cuda_sm120_e4m3", "cuda_sm120_e4m3_32"):
        assert names[run[impl[variant]]["fp8"]] == impl[variant] and run[impl[variant]]["bf16"] == -4
    for bf16 in ("cuda_sm120", "cuda_sm120_roles", "cuda_wgmma", "cuda_wgmma_v5"):
        assert names[run[impl[bf16]]["bf16"]] == impl[bf16] and run[impl[bf16]]["fp8"] >= 0
    assert all(r["fp8"] != -6 for r in run.values())  # no configuration of the table lacks an fp8 path
    assert lib.lib.kdtree_verify_config_for_pool(0, 7) == -4 and lib.lib.kdtree_verify_config_for_pool(99, 0) == -2
    for variant in ("cuda_sm120_fp8", "cuda_sm120_e4m3", "cuda_sm120_e4m3_32"):
        with pytest.raises(loader.KernelCallError, match=re.escape(f"{impl[variant]}, bf16 KV pool: ") + ".*a bf16 "
                           "pool on a forced configuration that reads fp8 \\(e4m3\\) pools only"):
            lib.config_for_pool(names.index(impl[variant]), "bf16")


def test_each_forced_impl_lists_the_pools_its_configuration_reads(lib):
    """Impl.kv_dtypes (what the CLI, parity and the hook read without a GPU) says what the library's pool mapping
    says for every forced configuration."""
    names = [c["kernel"] for c in lib.configs()]
    for impl, kernel in loader.CUDA_IMPLS.items():
        if kernel is None:
            continue
        reads = tuple(kv for kv, d in KV_DTYPES.items()
                      if lib.lib.kdtree_verify_config_for_pool(names.index(kernel), d.code) >= 0)
        assert IMPLS[impl].kv_dtypes == reads, impl


def _choice(select, *args):
    try:
        return select(*args)
    except launch_plan.NoConfiguration:
        return "refused"


# A grid of devices (compute capability x opt-in shared memory, around every configuration's size) and of shapes
# (batch x N x H, rows N x H from 1 to 8192) over both pools. The per-shape choice on 99 KB (the sm_120 kernel up to
# 32 rows, its second generation above) is checked by the same grid: rows 32 and 33 and the shared memory around
# the second generation's 99,432 B and its e4m3 variant's 100,968 are in it.
DEVICES = [launch_plan.Device(132, cc, smem) for cc in (80, 86, 89, 90, 100, 103, 120, 121)
           for smem in (1000, 86_911, 86_912, 99_431, 99_432, 100_967, 100_968, 101_376, 167_936, 231_423, 231_424,
                        232_448)]
SHAPES = [(bs, n, h) for bs in (1, 2, 8, 48, 160) for n in (1, 4, 16, 33, 64) for h in (1, 8, 16, 64, 128)]


def test_the_python_rule_is_the_librarys_choice_over_a_grid(lib):
    """launch_plan.select (what the budget plans with, on a CPU) answers what the library answers (what
    VerifyAttention plans with on a GPU, and what the launcher runs) for every device, shape and pool of the grid,
    refusals included. The library here holds sm_90a code."""
    assert "sm_90a" in lib.archs
    differ = [(dev, shape, kv, m, ours, theirs) for dev in DEVICES for shape in SHAPES for kv in KV_DTYPES
              for m in launch_plan.FP8_MATHS
              if (ours := _choice(launch_plan.select, *shape, kv, dev, m)) != (theirs := _choice(lib.select, *shape, kv,
                                                                                                  dev, m))]
    assert not differ, differ[:5]
    chosen = {_choice(lib.select, *shape, kv, dev, m) for dev in DEVICES for shape in SHAPES for kv in KV_DTYPES
              for m in launch_plan.FP8_MATHS}
    assert "refused" in chosen and len(chosen) >= 7  # the grid reaches every automatic configuration and a refusal
    assert launch_plan.E4M3_SM120 in chosen and launch_plan.E4M3_SM120_32 in chosen


def test_the_budget_plans_each_gpu_preset_as_the_library_would(lib):
    """The memory budget sizes the workspace from each GPU preset's facts with the Python rule: the library's
    own choice gives the same plan, for each preset, pool and reference shape."""
    from kdtree_lab.budget.presets import gpus

    for name, g in gpus().items():
        for kv in KV_DTYPES:
            for n, h in ((16, 8), (4, 16), (64, 128)):
                ours = _choice(launch_plan.plan, range(1, 9), n, h, kv, g.device)
                theirs = _choice(lambda *a: launch_plan.plan(*a, select=lib.select), range(1, 9), n, h, kv, g.device)
                assert ours == theirs, (name, kv)


def test_the_kv_dtype_codes_are_the_headers(lib):
    header = (Path(build.__file__).resolve().parents[2] / "kernels" / "kdtree_verify.h").read_text()
    for d in KV_DTYPES.values():
        macro = {"bf16": "KDT_KV_BF16", "fp8": "KDT_KV_FP8_E4M3"}[d.name]
        assert re.search(rf"#define {macro} {d.code}\b", header), macro


def test_configurations_are_named_exactly(lib):
    """Python names a configuration by its full name in the library's table, never by a prefix of it."""
    for c in lib.configs():
        assert lib.config_index(c["kernel"]) == c["index"]
    with pytest.raises(loader.KernelLoadError, match="no configuration verify_sm120_kernel in"):
        lib.config_index("verify_sm120_kernel")  # a prefix of two configurations' names
    assert lib.forced("verify_sm120_kernel<32,2>", "fp8", "exact") == \
        launch_plan.Config("verify_sm120_kernel<32,2,true>", 32)
    assert lib.forced("verify_sm120_kernel<32,2>", "fp8", "e4m3") == launch_plan.E4M3_SM120_32
    assert lib.forced("verify_sm120_kernel<32,2>", "fp8") == launch_plan.E4M3_SM120_32
    assert lib.forced("verify_sm120_roles_kernel<64>", "fp8") == launch_plan.E4M3_SM120
    with pytest.raises(launch_plan.NoConfiguration, match=re.escape("verify_sm120_kernel<32,2,true> does not read bf16")):
        lib.forced("verify_sm120_kernel<32,2,true>", "bf16")


def test_force_config_range(lib):
    n = lib.lib.kdtree_verify_num_configs()
    assert lib.lib.kdtree_verify_force_config(n) == 2 and lib.lib.kdtree_verify_force_config(-2) == 2
    assert lib.lib.kdtree_verify_force_config(n - 1) == 0 and lib.lib.kdtree_verify_force_config(-1) == 0
    kernels = [c["kernel"] for c in lib.configs()]
    # every configuration is named by an implementation, and every forced implementation names one
    assert sorted(kernels) == sorted(name for name in loader.CUDA_IMPLS.values() if name)


def test_loader_refuses_library_without_the_gpu_arch(lib):
    with pytest.raises(loader.KernelLoadError, match="sm_80"):
        loader.open_library(lib.path, require_arch="sm_80")


def test_default_nsplit_is_a_pure_function_of_host_ints():
    assert launch_plan.default_nsplit(1, 16, 8, 132) == 65  # two 64-row tiles: 130 prefix + 2 draft CTAs, one wave
    assert launch_plan.default_nsplit(1, 16, 8, 132, row_tile=32) == 32  # four 32-row tiles: 128 + 4 draft CTAs, one wave
    assert launch_plan.default_nsplit(8, 16, 8, 132) == 8  # 128 CTAs in one wave, not 9 splits and a 12-CTA second wave
    assert launch_plan.default_nsplit(48, 16, 8, 132) == 4  # 96 tiles: 384 CTAs, 2.9 waves (2 splits: 1.45 waves)
    assert launch_plan.default_nsplit(1, 64, 128, 132) == 1  # 128 tiles already fill the GPU; more splits add a wave
    for bs, n, h, sms in ((1000, 64, 128, 188), (1, 1, 1, 1), (3, 7, 5, 60)):
        nsplit = launch_plan.default_nsplit(bs, n, h, sms)
        assert 1 <= nsplit <= launch_plan.MAX_NSPLIT and nsplit == launch_plan.default_nsplit(bs, n, h, sms)


def test_the_sanitizers_every_configuration_covers_the_table(lib):
    """``sanitize_cases --impl all``: on the H200 every configuration of the table runs (the e4m3 variants through
    the fp8 cases of the sm_120 kernel and v4, the e4m3 tensor-core configuration by its own name); on a 99 KB sm_120 GPU the mma.sync ones within 99 KB; a table entry
    no implementation reaches is named."""
    from kdtree_lab.checks.sanitize_cases import every_configuration

    configs = lib.configs()
    h200 = every_configuration(configs, 90, 232_448)
    assert set(h200) == {"cuda_sm120", "cuda_sm120_roles", "cuda_wgmma", "cuda_wgmma_v5", "cuda_sm120_e4m3",
                         "cuda_sm120_e4m3_32"}
    reached = {loader.CUDA_IMPLS[i] for i in h200} | {loader.CUDA_IMPLS["cuda_sm120_fp8"],
                                                      loader.CUDA_IMPLS["cuda_wgmma_fp8"]}
    assert reached == {c["kernel"] for c in configs}
    assert set(every_configuration(configs, 120, 101_376)) == {"cuda_sm120", "cuda_sm120_roles", "cuda_sm120_e4m3",
                                                               "cuda_sm120_e4m3_32"}
    orphan = configs + [dict(configs[0], index=len(configs), kernel="verify_new_kernel<64>", fp8_config=-1)]
    with pytest.raises(ValueError, match="configs: no implementation runs verify_new_kernel<64>"):
        every_configuration(orphan, 90, 232_448)


def test_the_kernel_lab_names_configurations_by_name(lib, monkeypatch):
    """scripts/kernel_profile.py takes implementation names, never table positions; an unknown name is one line
    naming the ones it takes."""
    import importlib

    from kdtree_lab.core.paths import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    profile = importlib.import_module("kernel_profile")
    names = [c["kernel"] for c in lib.configs()]
    got = profile.config_indices("cuda_sm120_roles,cuda_sm120,cuda_wgmma_v5", lib)
    assert [names[i] for i in got] == ["verify_sm120_roles_kernel<64>", "verify_sm120_kernel<32,2>",
                                       "verify_wgmma_v5_kernel<64>"]
    assert profile.config_indices("all", lib) == list(range(len(names)))
    with pytest.raises(SystemExit, match="--configs: expected implementation names .*cuda_sm120_roles.*, found 2"):
        profile.config_indices("cuda_sm120,2", lib)


def test_the_split_rule_counts_the_ctas_of_a_cluster_configuration(lib):
    """kdt_config.cluster (the CTAs that serve one row tile, one thread-block cluster) stays in the ABI: every
    configuration of the table has 1 since the third form, the one 2-CTA cluster, left (commit
    65e9dc4 is the last with it). The split rule counts a cluster's CTAs, so 64-row tiles in 2-CTA clusters get the split
    count of 32-row tiles (one wave), and a plan fixed to such a configuration carries the cluster."""
    assert all(c["cluster"] == 1 for c in lib.configs())
    assert lib.forced(loader.CUDA_IMPLS["cuda_sm120_roles"], "bf16") == launch_plan.Config(
        loader.CUDA_IMPLS["cuda_sm120_roles"], 64, 1)
    assert launch_plan.default_nsplit(1, 16, 8, 132, 64, cluster=2) == launch_plan.default_nsplit(1, 16, 8, 132, 32)
    cfg = launch_plan.Config("verify_pair_kernel<64>", 64, 2)  # a configuration of 2-CTA clusters
    p = launch_plan.plan([1, 8], 16, 8, "bf16", launch_plan.Device(132, 90, 232_448, True),
                         select=launch_plan.fixed(cfg))
    assert p.config(1) == cfg
    assert p.nsplit(1) == 32 and p.nsplit(8) == launch_plan.default_nsplit(8, 16, 8, 132, 64, cluster=2)
