"""The vendor peer's CPU side: the pinned fetch and its extraction, the harness build (against the real XQA sources
when .xqa/ holds them), the benchmark's arguments, split rule, paged layout, rates, JSON and tables. The timing
itself runs on a GPU (scripts/xqa_peer.py)."""

import importlib
import json
import subprocess
import zipfile

import pytest
import torch

from kdtree_lab.checks.batch import build_verify_batch
from kdtree_lab.checks.oracle import compare, reference
from kdtree_lab.core.mla import D_QK, D_V
from kdtree_lab.core.paths import RESULTS, ROOT


@pytest.fixture(scope="module")
def mods():
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(ROOT / "scripts"))
    src, peer, tables = (importlib.import_module(n) for n in ("xqa_source", "xqa_peer", "docs_tables.sm120"))
    yield src, peer, tables
    mp.undo()


def _wheel(path, files: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def _fake_wheel(tmp_path, src, extra: dict[str, bytes] | None = None):
    files = {src.MEMBER_PREFIX + f: f"// {f}\n".encode() for f in src.REQUIRED_FILES}
    files.update({"flashinfer/xqa.py": b"# not a source", "flashinfer/data/csrc/other.cu": b"// elsewhere",
                  src.MEMBER_PREFIX: b""})  # a folder entry
    files.update(extra or {})
    wheel = _wheel(tmp_path / "fake.whl", files)
    return wheel, src.sha256_file(wheel)


def _earlier_xqa(tmp_path, name: str):
    """A .xqa folder left by an earlier fetch, holding one file ``name``."""
    dest = tmp_path / ".xqa"
    dest.mkdir()
    (dest / name).write_text("from an earlier fetch")
    return dest


# ---- fetch and extraction ---------------------------------------------------------------------------------------

def test_requirement_pins_the_wheel_by_version_and_hash(mods):
    src = mods[0]
    assert src.requirement() == f"flashinfer-python==0.7.4 --hash=sha256:{src.WHEEL_SHA256}"
    assert len(src.WHEEL_SHA256) == 64 and int(src.WHEEL_SHA256, 16) >= 0


def test_extract_takes_only_the_xqa_folder_flat_with_a_manifest(mods, tmp_path):
    src = mods[0]
    wheel, digest = _fake_wheel(tmp_path, src)
    dest = _earlier_xqa(tmp_path, "stale.cu")
    m = src.extract(wheel, dest, expected_sha256=digest)
    assert sorted(p.name for p in dest.iterdir()) == sorted([*src.REQUIRED_FILES, src.MANIFEST])
    assert m["wheel_sha256"] == digest and m["version"] == src.VERSION and set(m["files"]) == set(src.REQUIRED_FILES)
    assert (dest / "mla_sm120.cu").read_text() == "// mla_sm120.cu\n"
    assert json.loads((dest / src.MANIFEST).read_text()) == m
    assert src.check_sources(dest) == m
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".xqa-")]  # no temporary folder left


def test_extract_refuses_a_wheel_that_is_not_the_pinned_one_and_keeps_what_was_there(mods, tmp_path):
    src = mods[0]
    wheel, _ = _fake_wheel(tmp_path, src)
    dest = _earlier_xqa(tmp_path, "keep.cu")
    with pytest.raises(src.SourceError, match=r"sha256 [0-9a-f]{64}, expected " + src.WHEEL_SHA256):
        src.extract(wheel, dest)
    assert [p.name for p in dest.iterdir()] == ["keep.cu"]
    with pytest.raises(src.SourceError, match="does not exist"):
        src.extract(tmp_path / "missing.whl", dest)


def test_extract_refuses_nested_or_incomplete_source_folders(mods, tmp_path):
    src = mods[0]
    wheel, digest = _fake_wheel(tmp_path, src, {src.MEMBER_PREFIX + "sub/../../x.cu": b"escape"})
    with pytest.raises(src.SourceError, match="expected a file directly under"):
        src.extract(wheel, tmp_path / "d", expected_sha256=digest)
    wheel = _wheel(tmp_path / "partial.whl", {src.MEMBER_PREFIX + "mla_sm120.cu": b"x"})
    with pytest.raises(src.SourceError, match="lacks mla_sm120.cuh, tensorMap.cpp"):
        src.extract(wheel, tmp_path / "d", expected_sha256=src.sha256_file(wheel))
    assert not (tmp_path / "d").exists()


def test_check_sources_names_a_missing_or_altered_file_and_how_to_fetch(mods, tmp_path):
    src = mods[0]
    with pytest.raises(src.SourceError, match=r"MANIFEST.json not found \(run bash scripts/fetch_xqa.sh"):
        src.check_sources(tmp_path / "nothing")
    wheel, digest = _fake_wheel(tmp_path, src)
    dest = tmp_path / ".xqa"
    src.extract(wheel, dest, expected_sha256=digest)
    (dest / "tma.h").write_text("// changed")  # not a required file, but listed: still checked
    (dest / "mha.h").write_text("// changed")
    with pytest.raises(src.SourceError, match=r"mha.h is altered"):
        src.check_sources(dest)
    (dest / "mha.h").unlink()
    with pytest.raises(src.SourceError, match=r"mha.h is missing"):
        src.check_sources(dest)


def test_fetch_script_arguments_and_a_missing_wheel(tmp_path):
    script = ROOT / "scripts" / "fetch_xqa.sh"
    bad = subprocess.run(["bash", str(script), "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage:" in bad.stderr
    missing = subprocess.run(["bash", str(script), "--wheel", str(tmp_path / "none.whl")], capture_output=True,
                             text=True)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == f"xqa_source: wheel: {tmp_path / 'none.whl'} does not exist"


# ---- the harness build ------------------------------------------------------------------------------------------

def test_build_command_carries_the_kernel_flags(mods, tmp_path):
    src = mods[0]
    cmd = src.build_command("nvcc", "bf16", "sm_90a", 64, tmp_path, tmp_path / "h.so")
    assert cmd[0] == "nvcc" and cmd[-1] == str(src.HARNESS) and cmd[cmd.index("-o") + 1] == str(tmp_path / "h.so")
    for flag in ("--expt-relaxed-constexpr", "-DNDEBUG=1", "-DHEAD_ELEMS=576", "-DHEAD_GRP_SIZE=128",
                 "-DTOKENS_PER_PAGE=64", "-DCACHE_ELEM_ENUM=0", "-DMLA_BF16=1", f"-I{tmp_path}", "-shared"):
        assert flag in cmd
    assert cmd[cmd.index("-gencode") + 1] == "arch=compute_90a,code=sm_90a"
    fp8 = src.build_command("nvcc", "fp8", "sm_120a", 32, tmp_path, tmp_path / "h.so")
    assert "-DCACHE_ELEM_ENUM=2" in fp8 and "-DMLA_BF16=1" not in fp8 and "-DTOKENS_PER_PAGE=32" in fp8
    assert "arch=compute_120a,code=sm_120a" in fp8
    for kv, arch, page, what in (("fp16", "sm_90a", 64, "kv"), ("bf16", "sm_90a", 48, "page_size"),
                                 ("bf16", "90a", 64, "arch")):
        with pytest.raises(ValueError, match=what):
            src.build_command("nvcc", kv, arch, page, tmp_path, tmp_path / "h.so")


PTXAS_OK = """ptxas info    : Compiling entry function '_Z10kernel_mha...' for 'sm_90a'
ptxas info    : Function properties for _Z10kernel_mha...
    752 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 168 registers, used 0 barriers, 752 bytes cumulative stack size"""
PTXAS_FAIL = """src/mla_sm120.cu(1900): warning #177-D: variable "nbQKVHeads" was declared but never referenced
ptxas /tmp/tmpxft_0000_00000000-6_xqa_harness.ptx, line 5841; error   : Feature 'ldmatrix.b8' not supported on .target 'sm_90a'
ptxas fatal   : Ptx assembly aborted due to errors"""


def test_ptxas_log_parsing(mods):
    src = mods[0]
    assert src.ptxas_resources(PTXAS_OK) == {"stack_bytes": 752, "spill_store_bytes": 16, "spill_load_bytes": 16,
                                             "registers": 168}
    assert src.first_error(PTXAS_FAIL) == "ptxas: Feature 'ldmatrix.b8' not supported on .target 'sm_90a'"
    assert src.first_error("") == "no output"


def _have_sources(src) -> str | None:
    """Why the real-source tests cannot run here, or None."""
    from kdtree_lab.core.cuda_tools import find_nvcc

    if not find_nvcc():
        return "nvcc not found"
    try:
        src.check_sources()
    except src.SourceError as exc:
        return f"{exc} (CI's clean clone has no .xqa; these tests run where bash scripts/fetch_xqa.sh has)"
    return None


def _dynamic_symbols(path) -> tuple[set[str], set[str]]:
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        syms = list(ELFFile(f).get_section_by_name(".dynsym").iter_symbols())
    defined = {s.name for s in syms if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["type"] == "STT_FUNC"}
    return defined, {s.name for s in syms if s["st_shndx"] == "SHN_UNDEF" and s.name}


@pytest.mark.slow
@pytest.mark.parametrize("kv, arch", [("bf16", "sm_90a"), ("bf16", "sm_120a"), ("fp8", "sm_120a")])
def test_harness_builds_against_the_extracted_sources(mods, tmp_path, kv, arch):
    src = mods[0]
    why = _have_sources(src)
    if why:
        pytest.skip(why)
    from kdtree_lab.core.cuda_tools import find_nvcc

    b = src.build(kv, arch, 64, out_dir=tmp_path, nvcc=find_nvcc())
    assert b.error is None and b.library.is_file(), b.error
    assert b.resources["registers"] <= 232  # the math warps' setmaxnreg budget
    defined, undefined = _dynamic_symbols(b.library)
    assert {"xqa_peer_launch", "xqa_peer_scratch_bytes", "xqa_peer_last_error", "xqa_peer_tokens_per_page",
            "xqa_peer_dynamic_smem"} <= defined
    driver = {s for s in undefined if s.startswith("cu")}  # left to libcuda.so.1, loaded first at run time
    assert "cuTensorMapEncodeTiled" in driver and driver <= {"cuTensorMapEncodeTiled", "cuGetErrorName"}
    again = src.build(kv, arch, 64, out_dir=tmp_path, nvcc=find_nvcc())
    assert again.cached and again.library == b.library and again.resources == b.resources


@pytest.mark.slow
def test_fp8_does_not_build_for_sm90a_and_says_why(mods, tmp_path):
    src = mods[0]
    why = _have_sources(src)
    if why:
        pytest.skip(why)
    from kdtree_lab.core.cuda_tools import find_nvcc

    b = src.build("fp8", "sm_90a", 64, out_dir=tmp_path, nvcc=find_nvcc())
    assert b.library is None and not list(tmp_path.glob("*.so"))
    assert "not supported on .target 'sm_90a'" in b.error and b.summary()["ok"] is False


# ---- the benchmark's pure parts ---------------------------------------------------------------------------------

def test_arguments_defaults_and_additions(mods, tmp_path):
    peer = mods[1]
    a = peer.parse_args(["--out", str(tmp_path / "x.json")])
    assert (a.batches, a.lengths, a.impls, a.kv, a.sub_seqs, a.page_size, a.timing) == (
        [1, 8], [4096, 32768, 200000], ["cuda_sm120", "cuda"], ["bf16", "fp8"], ["auto"], 64, "graph")
    a = peer.parse_args(["--out", "x", "--impl", "cuda_wgmma,cuda", "--batches", "2", "--lengths", "100,200",
                         "--sub-seqs", "auto,1,32,1", "--kv", "bf16"])
    assert a.impls == ["cuda_sm120", "cuda", "cuda_wgmma"] and a.batches == [2] and a.lengths == [100, 200]
    assert a.sub_seqs == ["auto", 1, 32] and a.kv == ["bf16"] and a.argv[:2] == ["--out", "x"]


@pytest.mark.parametrize("args, message", [
    (["--batches", "0"], "--batches: expected integers >= 1, got '0'"),
    (["--lengths", "4k"], "--lengths: expected a comma list of integers, got '4k'"),
    (["--impl", "cuda_foo"], "--impl: expected names from cuda, "),
    (["--kv", "bf8"], "--kv: expected a comma list of bf16, fp8, got bf8"),
    (["--sub-seqs", ","], "--sub-seqs: expected auto and/or integers >= 1"),
    (["--page-size", "48"], "--page-size: invalid choice: 48"),
])
def test_bad_arguments_exit_2_with_one_line(mods, capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        mods[1].parse_args(["--out", "x.json", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_split_rule_as_launchmla_and_the_kernel_apply_it(mods):
    peer = mods[1]
    # H200, 132 SMs, bf16 (32-token tiles): (132 // 4) // B * 4, capped at one per 64 tokens of max_seq_len
    assert peer.xqa_sub_seqs(132, 1, 4160, 32) == 65
    assert peer.xqa_sub_seqs(132, 1, 200064, 32) == 132
    assert peer.xqa_sub_seqs(132, 8, 200064, 32) == 16  # 33 // 8 = 4, integer division as in the C++
    assert peer.xqa_sub_seqs(132, 48, 200064, 32) == 1
    assert peer.xqa_sub_seqs(188, 1, 200064, 32) == 188  # RTX PRO 6000
    assert peer.xqa_sub_seqs(132, 2, 128, 64) == 1
    # the kernel: one sub-sequence per two tiles at most, multi-block only from 4 tiles and 2 grid splits
    assert peer.xqa_sub_seqs_used(65, 4097, 32) == 64
    assert peer.xqa_sub_seqs_used(132, 200001, 32) == 132
    assert peer.xqa_sub_seqs_used(16, 100, 32) == 2
    assert peer.xqa_sub_seqs_used(16, 96, 32) == 1  # 3 tiles
    assert peer.xqa_sub_seqs_used(1, 200001, 32) == 1


def test_rows_are_credited_with_the_shapes_flops_and_bytes(mods):
    peer = mods[1]
    shape = peer.peer_shape(1, 200_000)
    assert (shape.batch, shape.prefix, shape.draft, shape.heads, shape.mask, shape.kv) == (1, 200_000, 1, 128,
                                                                                           "causal", "bf16")
    assert shape.flops == 2 * (576 + 512) * 128 * 200_001 == 55_705_878_528
    assert shape.kv_bytes == 200_000 * 576 * 2
    ceilings = {"copy_gbps": 4000.0, "mma_sync_tflops": 600.0, "gemm_tflops": 800.0}
    r = peer.make_row("xqa_mla", shape, 2.0, 20, "graph", ceilings, sub_seqs=132)
    assert r["TFLOP/s"] == round(55_705_878_528 / 2e-3 / 1e12, 2) == 27.85
    assert r["GB/s"] == 115.2 and r["of_copy"] == round(115.2 / 4000, 4)
    assert r["of_mma_sync"] == round(27.852939264 / 600, 4)
    assert (r["peer"], r["B"], r["L"], r["N"], r["H"], r["kv"], r["ms"], r["sub_seqs"]) == (
        "xqa_mla", 1, 200_000, 1, 128, "bf16", 2.0, 132)
    assert peer.peer_shape(8, 4096, "fp8").kv_bytes == 8 * 4096 * 576  # one byte per element
    assert peer.rates(shape, 1.0, {"copy_gbps": 1.0})["of_mma_sync"] is None  # ceiling not measured


def _result(peer, complete=True):
    c = {"copy_gbps": 4200.0, "mma_sync_tflops": 640.0, "gemm_tflops": 790.0}
    rows = []
    for b, length, ms_x, ms_s, ms_v in ((1, 4096, 0.123, 0.023, 0.026), (8, 200_000, 16.0, 2.232, 0.974)):
        s = peer.peer_shape(b, length)
        rows += [peer.make_row("xqa_mla", s, ms_x, 20, "graph", c, kernel="kernel_mha (mla_sm120.cu)",
                               sub_seqs=65, sub_seqs_rule=True, sub_seqs_used=64, page_size=64, seq_len=length + 1),
                 peer.make_row("xqa_mla", s, ms_x * 2, 20, "graph", c, kernel="kernel_mha (mla_sm120.cu)",
                               sub_seqs=1, sub_seqs_rule=False, sub_seqs_used=1, page_size=64, seq_len=length + 1),
                 peer.make_row("cuda_sm120", s, ms_s, 20, "graph", c, kernel="verify_sm120_kernel<32,2>",
                               nsplit=66, mask="causal"),
                 peer.make_row("cuda", s, ms_v, 20, "graph", c, kernel="verify_wgmma_v5_kernel<64>", nsplit=66,
                               mask="causal")]
    return {"provenance": {"gpu": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0+cu130",
                           "date_utc": "2026-12-02T10:00:00+00:00"},
            "xqa": {"package": "flashinfer-python", "version": "0.7.4", "arch": "sm_90a", "page_size": 64,
                    "builds": {"bf16": {"ok": True, "error": None},
                               "fp8": {"ok": False, "error": "ptxas: Feature 'ldmatrix.b8' not supported"}}},
            "ceilings": c, "timing": "graph", "rows": rows, "complete": complete,
            **({} if complete else {"stopped": "signal SIGTERM"})}


def test_printed_table_names_each_peer_and_its_shape(mods):
    text = mods[1].table(_result(mods[1]))
    lines = text.splitlines()
    assert lines[0] == "ceilings: copy 4200 GB/s, mma.sync 640 TFLOP/s, GEMM 790 TFLOP/s; timing: graph"
    assert "| xqa_mla (65 sub-seqs) | kernel_mha (mla_sm120.cu) | bf16 | 1 | 4,096 | 1 | 128 | 0.1230 |" in text
    assert "| cuda | verify_wgmma_v5_kernel<64> | bf16 | 8 | 200,000 | 1 | 128 | 0.9740 |" in text
    assert len(lines) == 1 + 2 + 8  # the ceilings, the header and its rule, one line per row


def test_write_result_is_atomic(mods, tmp_path):
    out = tmp_path / "r" / "x.json"
    mods[1].write_result(out, {"a": 1})
    assert json.loads(out.read_text()) == {"a": 1} and [p.name for p in out.parent.iterdir()] == ["x.json"]


def test_without_a_gpu_the_script_exits_1_with_one_line_and_writes_nothing(mods, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: this checks the refusal without one")
    out = tmp_path / "x.json"
    assert mods[1].main(["--out", str(out)]) == 1
    assert capsys.readouterr().err.strip() == ("xqa_peer: no CUDA GPU: the peer benchmark runs on a GPU machine "
                                               "(carry .xqa there)")
    assert not out.exists()


def test_an_interrupted_run_says_so_in_its_json(mods, tmp_path, capsys, monkeypatch):
    peer = mods[1]
    out = tmp_path / "x.json"

    def cut_off(a):
        peer.write_result(a.out, {**_result(peer), "complete": False})
        raise peer.Interrupted("signal SIGTERM")

    monkeypatch.setattr(peer, "run", cut_off)
    assert peer.main(["--out", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["complete"] is False and data["stopped"] == "signal SIGTERM" and len(data["rows"]) == 8
    assert capsys.readouterr().err.strip() == "xqa_peer: signal SIGTERM"


# ---- the paged layout -------------------------------------------------------------------------------------------

def _xqa_reference(x, page_size: int) -> torch.Tensor:
    """What XQA MLA computes from its inputs, read the way it reads them: request b's token t at row
    page_list[b, t // page] * page + t % page of the cache, seq_lens[b] tokens, logits q.k x q_scale x kv_scale,
    V = the first 512 elements of the same rows, times kv_scale."""
    cache = x.cache.to(torch.float64).reshape(-1, D_QK)
    out = []
    for b in range(x.q.shape[0]):
        t = torch.arange(int(x.seq_lens[b]))
        rows = cache[x.page_list[b, t // page_size].long() * page_size + t % page_size]
        q = x.q[b].to(torch.float64)
        p = torch.softmax(q @ rows.T * (x.q_scale * x.kv_scale), dim=-1)
        out.append(p @ rows[:, :D_V] * x.kv_scale)
    return torch.stack(out)


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_paged_cache_holds_the_same_rows_as_our_batch(mods, kv):
    peer = mods[1]
    batch = build_verify_batch([70, 130], 1, 128, mask="causal", seed=3, kv_dtype=kv)
    if kv == "fp8":  # XQA's Q and draft row are e4m3: the oracle gets those values
        batch.q.copy_(batch.q.to(torch.float8_e4m3fn).to(torch.bfloat16))
        batch.k_extend.copy_(batch.k_extend.to(torch.float8_e4m3fn).to(torch.bfloat16))
        batch.v_extend.copy_(batch.k_extend[..., :D_V])
    x = peer.paged_inputs(batch, 64, seed=5)
    assert x.cache.dtype == batch.k_buffer.dtype and x.q.dtype == batch.k_buffer.dtype
    assert x.cache.shape == (2 * 3, 64, D_QK) and x.page_list.shape == (2, 3) and x.max_seq_len == 192
    assert sorted(x.page_list.flatten().tolist()) == list(range(6))  # every page once, shuffled
    assert x.page_list.flatten().tolist() != list(range(6))
    assert x.seq_lens.tolist() == [71, 131] and x.out.shape == (2, 128, D_V) and bool(x.out.isnan().all())
    assert x.q_scale == batch.sm_scale and x.kv_scale == batch.k_scale
    err = compare(_xqa_reference(x, 64), reference(batch))
    assert err["rel_l2"] < 1e-12 and err["nan"] == 0
    unused = x.cache.view(torch.uint8).reshape(-1, D_QK * x.cache.element_size())[
        x.page_list[0, 1].long() * 64 + 7:(x.page_list[0, 1].long() + 1) * 64]  # request 0's tokens 71..127
    assert int(unused.count_nonzero()) == 0


def test_our_side_of_the_check_runs_the_plans_split_count(mods):
    """run_ours, as the oracle check and the cross-check call it, here through the Triton twin (CPU interpreter)."""
    batch = build_verify_batch([40, 90], 1, 128, mask="causal", seed=4)
    out, flags, nsplit = mods[1].run_ours("triton", batch)
    assert out is batch.o and flags == 0 and nsplit >= 1
    assert compare(out, reference(batch))["rel_l2"] <= mods[1].PEER_TOL


def test_paged_inputs_refuse_other_shapes(mods):
    peer = mods[1]
    with pytest.raises(ValueError, match="XQA MLA runs N = 1 x H = 128; got N = 2, H = 128"):
        peer.paged_inputs(build_verify_batch([10], 2, 128, mask="causal"), 64)
    with pytest.raises(ValueError, match="got N = 1, H = 8"):
        peer.paged_inputs(build_verify_batch([10], 1, 8, mask="causal"), 64)


# ---- the generated table ----------------------------------------------------------------------------------------

def test_doc_table_reads_the_committed_run_or_says_not_yet_measured(mods, tmp_path, monkeypatch):
    peer, tables = mods[1], mods[2]
    monkeypatch.setattr(tables, "XQA_PEER", RESULTS / "h200" / "no-such-run" / "xqa-peer.json")
    assert tables.xqa_peer_table().startswith("Not yet measured: this table is generated from "
                                              "`data/results/h200/no-such-run/xqa-peer.json`")
    path = RESULTS / "h200" / "2026-12-01-xqa-peer" / "xqa-peer.json"
    copy = tmp_path / "results" / "xqa-peer.json"
    copy.parent.mkdir()
    copy.write_text(json.dumps(_result(peer)))
    monkeypatch.setattr(tables, "XQA_PEER", copy)
    monkeypatch.setattr(tables, "_rel", lambda p: str(path.relative_to(ROOT)) if p == copy else str(p))
    text = tables.xqa_peer_table()
    assert text.startswith("From `data/results/h200/2026-12-01-xqa-peer/xqa-peer.json`: NVIDIA H200 (driver "
                           "580.159.04, torch 2.11.0+cu130), 2026-12-02; CUDA-graph replays")
    assert "fp8: does not build (ptxas: Feature 'ldmatrix.b8' not supported)" in text
    assert ("| pool, B, L | XQA MLA | its KV splits per request | `cuda_sm120` (verify_sm120_kernel<32,2>) | "
            "`cuda` (verify_wgmma_v5_kernel<64>) | XQA / fastest of ours |") in text
    # XQA at its own split rule only (the 1-split rows are not in the table); ratio against the fastest of ours
    assert "| bf16, 1, 4,096 | 0.123 (1% / 1%) | 64 | 0.023 (8% / 5%) | 0.026 (7% / 4%) | 5.3x |" in text
    assert "| bf16, 8, 200,000 | 16.000 (4% / 3%) | 64 | 2.232 (31% / 20%) | 0.974 (71% / 45%) | 16.4x |" in text
    assert len([ln for ln in text.splitlines() if ln.startswith("| bf16")]) == 2
    assert "Timed otherwise" not in text
    partial = _result(peer, complete=False)
    partial["rows"][0]["timing"] = "eager (capture failed: RuntimeError)"
    copy.write_text(json.dumps(partial))
    text = tables.xqa_peer_table()
    assert "**incomplete run** (signal SIGTERM)" in text
    assert "Timed otherwise (the row's capture failed): xqa_mla at B = 1, L = 4,096." in text


def test_performance_note_carries_the_generated_block(mods):
    text = (ROOT / "docs" / "performance.md").read_text()
    body = text.split("<!-- BEGIN xqa_peer -->\n", 1)[1].split("<!-- END xqa_peer -->", 1)[0]
    assert body == mods[2].xqa_peer_table() + "\n", "docs/performance.md is stale: run python scripts/readme_tables.py"
    assert "## The vendor peer: XQA MLA on the H200" in text


def test_nothing_of_xqa_is_tracked():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    xqa_names = {"mla_sm120.cu", "mla_sm120.cuh", "mha_sm90.cu", "tensorMap.cpp", "gmma_impl.cuh"}
    assert not [t for t in tracked if t.startswith(".xqa/") or t.rsplit("/", 1)[-1] in xqa_names]
    ignored = subprocess.run(["git", "check-ignore", "-q", ".xqa/mla_sm120.cu"], cwd=ROOT)
    assert ignored.returncode == 0, ".xqa/ must be git-ignored (.gitignore)"
