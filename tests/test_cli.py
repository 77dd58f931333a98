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
    (["budget", "--sglang-log", "/nonexistent/sglang.log"],
     "argument --sglang-log: expected a readable file, found none at /nonexistent/sglang.log"),
    (["audit", "--prefix", "abc"], "argument --prefix: expected comma-separated integers >= 1, found 'abc'"),
    (["audit", "--prefix", "0"], "argument --prefix: expected comma-separated integers >= 1, found '0'"),
    (["audit", "--draft", "0"], "argument --draft: expected an integer >= 1, found '0'"),
    (["budget", "--max-bs", "-1"], "argument --max-bs: expected an integer >= 1, found '-1'"),
    (["speculate", "--context", "0"], "argument --context: expected comma-separated integers >= 1, found '0'"),
    (["speculate", "--accept-length", "-2"], "argument --accept-length: expected a number > 0, found '-2'"),
    (["parity", "--impl", "triton", "--cases", "-1"], "argument --cases: expected an integer from 0 to 100000, found '-1'"),
    (["parity", "--max-prefix", "0"], "argument --max-prefix: expected an integer from 1 to 4194304, found '0'"),
    (["parity", "--heads", "8,-1"], "argument --heads: expected comma-separated integers >= 1, found '8,-1'"),
    (["parity", "--impl", "nope"], "argument --impl: expected one of cuda, cuda_sm120,"),
    (["capture", "--replays", "0"], "argument --replays: expected an integer from 1 to 100000, found '0'"),
    (["capture", "--heads", "0"], "argument --heads: expected an integer >= 1, found '0'"),
    (["capture", "--bs", "1,x"], "argument --bs: expected comma-separated integers >= 1, found '1,x'"),
    (["budget", "--nsplit", "-3"], "argument --nsplit: expected an integer from 0 to 512, found '-3'"),
    (["budget", "--chunked-prefill", "0"], "argument --chunked-prefill: expected an integer >= 1, found '0'"),
    (["budget", "--mem-fraction", "1.5"], "argument --mem-fraction: expected a number > 0 and <= 1, found '1.5'"),
    (["budget", "--margin-mib", "-1"], "argument --margin-mib: expected a number >= 0, found '-1'"),
    (["run", "--cell-timeout", "0"], "argument --cell-timeout: expected an integer >= 1, found '0'"),
    (["budget", "--tp"], "argument --tp: expected a value after it, found none"),
    (["budget", "--frob"], "kdtree-lab budget: unrecognized argument(s) --frob: expected only the options --help lists"),
])
def test_bad_arguments_get_one_line_and_exit_2(argv, needle, capsys):
    from kdtree_lab.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "usage:" not in err, err
    assert err.rstrip().endswith(f"(see kdtree-lab {argv[0]} --help)"), err


def _options():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return [(name, a) for name, p in sub.choices.items() for a in p._actions if a.option_strings and a.dest != "help"]


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_shows_each_default_and_no_markup(sub, capsys):
    with pytest.raises(SystemExit):
        main([sub, "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, also at hyphens
    assert "`" not in text and "**" not in text
    for name, a in _options():
        if name != sub:
            continue
        assert a.help, f"{sub} {a.option_strings[0]} has no help"
        if a.default not in (None, False):
            shown = ",".join(map(str, a.default)) if isinstance(a.default, (list, tuple)) else str(a.default)
            assert "default" in a.help or "".join(f"(default: {shown})".split()) in text, (sub, a.option_strings[0])


def test_top_level_help_has_no_markup(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "`" not in out and "kdtree-lab" in out


def test_every_count_and_size_argument_is_bounded():
    """An integer argument of a command is parsed by a bounded type (a seed is any integer)."""
    unbounded = [(name, a.option_strings[0]) for name, a in _options()
                 if a.type is int and a.dest != "seed"]
    assert not unbounded, unbounded


def test_sglang_log_binary_foreign_and_without_memory_lines(tmp_path, capsys):
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x00\xff\xfe")
    with pytest.raises(SystemExit) as exc:
        main(["budget", "--sglang-log", str(binary)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --sglang-log: expected a UTF-8 text log, found binary data" in err
    assert len(err.strip().splitlines()) == 1
    foreign = tmp_path / "notes.txt"
    foreign.write_text("shopping list\nmilk\n")
    assert main(["budget", "--sglang-log", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert f"--sglang-log {foreign}: expected an SGLang server log, found no line of SGLang's log format" in err
    assert len(err.strip().splitlines()) == 1
    early = tmp_path / "sglang.log"
    early.write_text("[2026-11-01 10:00:00 TP0] Init torch distributed begin.\n")
    assert main(["budget", "--sglang-log", str(early)]) == 0
    err = capsys.readouterr().err
    assert f"warning: --sglang-log {early}: none of SGLang's memory lines (Memory baseline taken" in err


def test_budget_prints_the_validate_line_for_the_first_start_and_the_on_line_after(capsys):
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    first, after = out.index("launch line, first start"), out.index("launch line, after a clean first session")
    assert first < after
    assert out[first:after].count("KDTREE_VERIFY=validate python -m kdtree_lab.sglang.serve") == 1
    assert "KDTREE_VERIFY=on python -m kdtree_lab.sglang.serve" in out[after:]
    assert main(["budget", "--stock-verify"]) == 0
    out = capsys.readouterr().out
    assert "KDTREE_VERIFY" not in out and "python -m sglang.launch_server" in out


def test_build_table_is_aligned_and_names_are_demangled(monkeypatch, capsys):
    from kdtree_lab.core.display import aligned_table
    from kdtree_lab.kernels.build import _short

    assert _short("_ZN3kdt15mma_peak_kernelEiPf") == "mma_peak_kernel"
    assert _short("_ZN3kdt19verify_sm120_kernelILi32ELi2ELb1EEEvNS_6ParamsE") == "verify_sm120_kernel<32,2,true>"
    text = aligned_table([{"kernel": "a", "registers": 5}, {"kernel": "verify_sm120_kernel<32,2>", "registers": 232}])
    lines = text.splitlines()
    assert len({len(ln) for ln in lines}) == 1, text  # every row as wide as the header: aligned
    assert lines[2].endswith("  5") and lines[3].endswith("232")


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
    (["--tp", "3"], "argument --tp: expected a divisor of the model's 64 heads, found 3"),
    (["--gpu", "h9000"], "argument --gpu: expected one of b200, h100, h200, rtx-5090, rtx-pro-6000, found"),
    (["--gpu", "h9000"], "found 'h9000'"),
    (["--draft", "medusa"], "argument --draft: expected one of ddtree-math500, dflash-gsm8k"),
    (["--nodes", "1,4"], "argument --nodes: expected tree sizes >= 2 (the root and at least one draft), found 1,4"),
    (["--accept-length", "2.3"], "argument --accept-length and --accept-nodes: expected both"),
    (["--accept-length", "5", "--accept-nodes", "4"], "acceptance length: a chain of 4 nodes commits between 1 and 4"),
    (["--step-ms", "12"], "argument --step-context: a measured step time needs the context"),
    (["--batch", "100"], "argument --batch: expected 1 to 48 (the grid of ours times), found 100"),
])
def test_speculate_refuses_bad_input_in_one_line(argv, needle, capsys):
    from kdtree_lab.cli.main import main

    assert main(["speculate", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


