"""The console command: --help everywhere, --json where output is data, clear refusals."""

import json
import subprocess
import sys

import pytest

from kdtree_lab.cli.main import build_parser, main

SUBCOMMANDS = ["doctor", "run", "audit", "build", "parity", "bench", "capture", "budget", "speculate"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kdtree_lab", *args], capture_output=True, text=True)


def test_every_subcommand_is_registered():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(SUBCOMMANDS)


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help(sub):
    with pytest.raises(SystemExit) as exc:
        main([sub, "--help"])
    assert exc.value.code == 0


def test_doctor_json(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("python", "torch", "triton", "nvcc", "nvcc_archs", "gpu_name", "compute_capability",
                "sm120_in_torch", "cuobjdump", "profile"):
        assert key in data


def test_run_refuses_unknown_parameter_by_name():
    proc = _cli("run", "--profile", "cpu", "-p", "no_such_param=1")
    assert proc.returncode == 2
    assert "no_such_param" in proc.stderr


def test_run_refuses_wrong_type_by_name():
    proc = _cli("run", "--profile", "cpu", "-p", "random_cases=abc")
    assert proc.returncode == 2
    assert "random_cases" in proc.stderr and "expected int" in proc.stderr


def test_run_refuses_unknown_profile_and_notebook():
    assert "unknown profile 'nope'" in _cli("run", "--profile", "nope").stderr
    assert "unknown notebook" in _cli("run", "--profile", "cpu", "--only", "42").stderr


def test_audit_json_reports_variant_mismatch(capsys):
    assert main(["audit", "--variant", "eager", "--against", "capture", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    bad = {r["name"] for r in data["rows"] if not r["ok"]}
    assert bad == {"qo_indptr", "custom_mask"}


def test_parity_cli_offers_every_cuda_implementation():
    from kdtree_lab.cli import main as cli
    from kdtree_lab.kernels.impls import IMPLS

    parser = cli.build_parser()
    for impl in IMPLS:
        assert parser.parse_args(["parity", "--impl", impl]).impl == impl


@pytest.mark.parametrize("argv,needle", [
    (["budget", "--sglang-log", "/nonexistent/sglang.log"], "argument --sglang-log: /nonexistent/sglang.log: expected a readable file"),
    (["audit", "--prefix", "abc"], "argument --prefix: invalid comma-separated integers >= 1 value: 'abc'"),
    (["audit", "--prefix", "0"], "argument --prefix: invalid comma-separated integers >= 1 value: '0'"),
    (["audit", "--draft", "0"], "argument --draft: invalid integer >= 1 value: '0'"),
    (["budget", "--max-bs", "-1"], "argument --max-bs: invalid integer >= 1 value: '-1'"),
    (["speculate", "--context", "0"], "argument --context: invalid comma-separated integers >= 1 value: '0'"),
    (["speculate", "--accept-length", "-2"], "argument --accept-length: invalid number > 0 value: '-2'"),
])
def test_bad_arguments_get_one_line_and_exit_2(argv, needle, capsys):
    from kdtree_lab.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err


def test_parity_refuses_a_cuda_impl_without_a_gpu(capsys):
    import torch

    from kdtree_lab.cli.main import main

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["parity", "--impl", "cuda_sm120"]) == 2
    assert "--impl cuda_sm120 needs a CUDA GPU" in capsys.readouterr().err


def test_run_refuses_a_gpu_profile_without_a_gpu_and_an_unwritable_out(capsys, tmp_path):
    import torch

    from kdtree_lab.cli.main import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", "--only", "00", "--out", str(blocker / "run")]) == 2
    assert f"--out {blocker / 'run'}: expected a writable directory" in capsys.readouterr().err
    if torch.cuda.is_available():
        return
    assert main(["run", "--profile", "h200", "--only", "00"]) == 2
    assert "--profile h200: expected a CUDA GPU, found none" in capsys.readouterr().err


def test_parity_refuses_an_fp8_pool_for_an_impl_that_does_not_serve_it(capsys):
    from kdtree_lab.cli.main import main

    assert main(["parity", "--impl", "cuda_narrow", "--kv-dtype", "fp8", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--kv-dtype fp8: impl cuda_narrow serves bf16 KV pools, not fp8" in err and "Traceback" not in err


def test_audit_cli_names_an_fp8_declaration_over_a_bf16_pool(capsys):
    from kdtree_lab.cli.main import main

    assert main(["audit", "--declare-kv-dtype", "fp8_e4m3", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    bad = [i for i in data["invariants"] if not i["ok"]]
    assert [i["name"] for i in bad] == ["kv_pool_dtype"] and "found bfloat16" in bad[0]["detail"]
    assert main(["audit", "--kv-dtype", "fp8", "--k-scale", "0.5", "--declare-kv-dtype", "fp8_e4m3"]) == 0


@pytest.mark.parametrize("argv,needle", [
    (["--tp", "3"], "--tp: expected a divisor of the model's 64 heads, got 3"),
    (["--gpu", "a100"], "--gpu: expected one of"),
    (["--draft", "medusa"], "--draft: expected one of"),
    (["--nodes", "1,4"], "--nodes: expected tree sizes >= 2"),
    (["--accept-length", "2.3"], "--accept-length and --accept-nodes: expected both"),
    (["--accept-length", "5", "--accept-nodes", "4"], "acceptance length: a chain of 4 nodes commits between 1 and 4"),
    (["--step-ms", "12"], "--step-context: a measured step time needs the context"),
    (["--batch", "100"], "batch: 100 is above the grid"),
])
def test_speculate_refuses_bad_input_in_one_line(argv, needle, capsys):
    from kdtree_lab.cli.main import main

    assert main(["speculate", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_speculate_json_is_the_sweep(capsys):
    from kdtree_lab.cli.main import main

    assert main(["speculate", "--context", "4096,200000", "--nodes", "4,16", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["context"] for r in res["rows"]] == [4096, 200000]
    assert set(res["rows"][0]["trees"]["ours"]) == {"4", "16"} and res["label"].startswith("model")
    assert set(res["break_even"]) == {"ours", "sglang"}
