"""kdtree_lab.checks.ab_interleave: its arguments and its arithmetic on the CPU (the library paths, the shapes, the
per-round comparison, loader.use_library's swap); its GPU path in tests/test_gpu_ab_interleave.py."""

import json

import pytest

from kdtree_lab.checks import ab_interleave as ab
from kdtree_lab.kernels import loader


def test_a_library_is_named_by_its_path_or_its_build_json(tmp_path):
    so = tmp_path / "libkdtree_verify-x.so"
    assert ab.library_path(so) == so
    build = tmp_path / "build-main.json"
    build.write_text(json.dumps({"build": {"library": str(so)}, "ok": True}))
    assert ab.library_path(build) == so
    for bad, words in ((tmp_path / "nothing.json", "build --json"), (tmp_path / "lib.a", "expected a library")):
        with pytest.raises(ValueError, match=words):
            ab.library_path(bad)
    build.write_text(json.dumps({"ok": True}))
    with pytest.raises(ValueError, match="build.library"):
        ab.library_path(build)


def test_shapes_parse_and_bad_ones_are_refused_in_one_line():
    s = ab.parse_shape("1,32768,16,16,fp8")
    assert (s.batch, s.prefix, s.draft, s.heads, s.kv, s.mask) == (1, 32768, 16, 16, "fp8", "tree")
    assert ab.parse_shape("8,200000,4,8").kv == "bf16"
    for bad in ("1,2,3", "1,2,3,0", "1,2,3,4,fp16", "a,2,3,4"):
        with pytest.raises(ValueError, match=r"expected B,L,N,H\[,KV\] \(positive integers; KV one of"):
            ab.parse_shape(bad)  # roofline.parse_shape, the bench command line's too


def test_the_comparison_reads_each_round_and_its_sign():
    a = [[0.100, 0.102, 0.101], [0.110, 0.111, 0.109], [0.100, 0.100, 0.100]]  # ms; round 2 drifted up
    b = [[0.098, 0.099, 0.097], [0.108, 0.107, 0.109], [0.101, 0.101, 0.101]]
    s = ab.summarize(a, b)
    assert s.round_diffs_us == [-3.0, -2.0, 1.0]
    assert s.median_diff_us == pytest.approx(-2.0)
    assert (s.rounds_b_faster, s.rounds) == (2, 3)
    assert s.median_a_us == pytest.approx(101.0) and s.median_b_us == pytest.approx(101.0)
    assert s.change == pytest.approx(-2.0 / 101.0)
    with pytest.raises(ValueError, match="same number"):
        ab.summarize(a, b[:2])
    with pytest.raises(ValueError, match="non-empty"):
        ab.summarize([[]], [[0.1]])


def test_bad_arguments_exit_2_with_one_line_before_any_gpu_work(tmp_path, capsys):
    so = str(tmp_path / "a.so")
    assert ab.main(["--lib-a", so, "--lib-b", so, "--impl", "cuda_sm120", "--shape", "1,2,3"]) == 2
    assert ab.main(["--lib-a", so, "--lib-b", so, "--impl", "triton", "--shape", "1,64,4,8"]) == 2
    assert ab.main(["--lib-a", so, "--lib-b", so, "--impl", "cuda", "--shape", "1,64,4,8", "--rounds", "1"]) == 2
    assert ab.main(["--lib-a", so, "--lib-b", so, "--impl", ",", "--shape", "1,64,4,8"]) == 2
    assert ab.main(["--lib-a", so, "--lib-b", so, "--impl", "cuda_sm120_e4m3", "--shape", "1,64,4,8"]) == 2
    assert ab.main(["--lib-a", so, "--lib-b", so, "--impl", "cuda", "--shape", "1,64,4,8"]) == 2  # no GPU or no .so
    assert ab.main(["--lib-a", so, "--lib-b", so, "--impl", "cuda", "--shape", "1,64,4,8", "--nsplit", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 7 and all(x.startswith("ab_interleave: ") for x in err)
    assert err[6] == "ab_interleave: --nsplit: expected 0 (automatic) to 512, found -1"
    assert err[0].startswith("ab_interleave: --shape: expected B,L,N,H") and "--impl" in err[1] and "triton" in err[1] and "--rounds" in err[2]
    assert "--impl" in err[3] and "bf16" in err[4] and ("GPU" in err[5] or "does not exist" in err[5])


def test_use_library_swaps_the_process_library_and_restores_it(monkeypatch):
    first, other = object(), object()
    monkeypatch.setattr(loader, "_LIBRARY", first)
    with loader.use_library(other):
        assert loader.library() is other
    assert loader._LIBRARY is first
    with pytest.raises(KeyError):
        with loader.use_library(other):
            raise KeyError("inside")
    assert loader._LIBRARY is first
    monkeypatch.setattr(loader, "_FORCED", 3)
    with pytest.raises(RuntimeError, match="forced configuration"):
        with loader.use_library(other):
            pass
    assert loader._LIBRARY is first
