"""The console command: --help everywhere, --json where output is data, clear refusals."""

import json
import subprocess
import sys

import pytest

from kdtree_lab.cli.main import build_parser, main

SUBCOMMANDS = ["doctor", "run", "audit", "build", "parity", "bench", "capture", "budget", "speculate", "generate"]


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
    assert "argument --only: expected notebook numbers or names (00, 01, 02, 03, 04, 05, 06, 07, 08), found '42'" in _cli(
        "run", "--profile", "cpu", "--only", "42").stderr


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
    (["budget", "--mem-fraction", "nan"], "argument --mem-fraction: expected a finite number, found 'nan'"),
    (["budget", "--margin-mib", "-1"], "argument --margin-mib: expected a number >= 0, found '-1'"),
    (["run", "--cell-timeout", "0"], "argument --cell-timeout: expected an integer >= 1, found '0'"),
    (["budget", "--tp"], "argument --tp: expected a value after it, found none"),
    (["budget", "--frob"], "kdtree-lab budget: unrecognized argument(s) --frob: expected only the options --help lists"),
    (["speculate", "--gpu", "a100"], "kdtree-lab speculate: argument --gpu: expected one of b200, h100, h200, "
                                     "rtx-5090, rtx-pro-6000, found 'a100'"),
    (["budget", "--model", "llama"], "argument --model: expected one of deepseek-v2-lite, deepseek-v3, kimi-k2, "
                                     "found 'llama'"),
    (["speculate", "--draft", "medusa"], "argument --draft: expected one of ddtree-math500, dflash-gsm8k"),
    (["speculate", "--nodes", "1,4"], "argument --nodes: expected comma-separated integers >= 2, found '1,4'"),
])
def test_bad_arguments_get_one_line_and_exit_2(argv, needle, capsys):
    from kdtree_lab.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "usage:" not in err, err
    assert err.rstrip().endswith(f"(see kdtree-lab {argv[0]} --help)"), err


def test_the_same_mistake_gets_the_same_words_in_every_command(capsys):
    """budget and speculate share presets: an unknown one reads the same (the argument, expected, found)."""
    lines = []
    for cmd in ("budget", "speculate"):
        with pytest.raises(SystemExit) as exc:
            main([cmd, "--gpu", "h9000"])
        assert exc.value.code == 2
        lines.append(capsys.readouterr().err.replace(cmd, "CMD"))
    assert lines[0] == lines[1], lines
    assert "argument --gpu: expected one of b200, h100, h200, rtx-5090, rtx-pro-6000, found 'h9000'" in lines[0]


@pytest.mark.parametrize("argv,found", [(["--bogus"], "'--bogus'"), ([], "none"), (["bogus"], "'bogus'"),
                                        (["--bogus", "--json"], "'--bogus'")])
def test_a_missing_or_unknown_command_is_named(argv, found, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"kdtree-lab: argument COMMAND: expected one of doctor, run, audit, build, parity, budget, "
                          f"capture, bench, speculate, generate, found {found} (see kdtree-lab --help)"), err


def test_library_refusals_are_written_as_the_flags_that_set_them(capsys):
    from kdtree_lab.cli.args import as_flags

    assert as_flags("tp: expected a divisor of 64, got 3", ["tp"]) == "argument --tp: expected a divisor of 64, found 3"
    assert as_flags("accept_length and accept_nodes: expected both", ["accept_length", "accept_nodes"]) == \
        "arguments --accept-length and --accept-nodes: expected both"
    assert as_flags("model: expected one of ['a', 'b'], got 'x'", {"model": "--model"}) == \
        "argument --model: expected one of a, b, found 'x'"
    assert as_flags("no colon here, got it", ["tp"]) == "no colon here, got it"
    assert main(["budget", "--tp", "3"]) == 2
    assert capsys.readouterr().err == ("kdtree-lab budget: argument --tp: expected a divisor of the model's 64 heads, "
                                       "found 3\n")
    assert main(["budget", "--quant", "nf4"]) == 2
    assert "argument --quant: expected one of bf16, fp8, int4 (the weights kimi-k2 has), found 'nf4'" in \
        capsys.readouterr().err


def _options():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return [(name, a) for name, p in sub.choices.items() for a in p._actions if a.option_strings and a.dest != "help"]


def _help_blocks(sub: str, capsys) -> dict[str, str]:
    """``kdtree-lab SUB --help`` (80 columns) split per option: first option string -> its lines."""
    import re

    with pytest.raises(SystemExit):
        main([sub, "--help"])
    out = capsys.readouterr().out.split("options:", 1)[1]
    blocks, key = {}, None
    for line in out.splitlines():
        if m := re.match(r"  (-[-\w]+)", line):
            key = m.group(1)
        if key:
            blocks[key] = blocks.get(key, "") + line + "\n"
    return blocks


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_shows_each_default_and_no_markup(sub, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    blocks = _help_blocks(sub, capsys)
    assert "`" not in "".join(blocks.values()) and "**" not in "".join(blocks.values())
    for name, a in _options():
        if name != sub:
            continue
        assert a.help, f"{sub} {a.option_strings[0]} has no help"
        if a.nargs == 0:  # a flag: off unless given
            continue
        block = " ".join(blocks[a.option_strings[0]].split())
        assert "default" in block, (sub, a.option_strings[0], block)
        if a.default is not None and "default" not in a.help:
            shown = ",".join(map(str, a.default)) if isinstance(a.default, (list, tuple)) else str(a.default)
            assert f"(default: {shown})" in block, (sub, a.option_strings[0], block)


def test_help_lists_implementations_whole_and_one_per_line(capsys, monkeypatch):
    """bench --impl's choices are never broken inside a name; parity --impl is a list, one implementation a line."""
    import re

    from kdtree_lab.kernels.impls import IMPLS

    monkeypatch.setenv("COLUMNS", "80")
    bench = _help_blocks("bench", capsys)["--impl"].splitlines()
    for name in [*IMPLS, "sglang_extend", "sglang_decode"]:
        assert any(re.search(rf"(?<![\w]){name}(?![\w])", line) for line in bench), (name, bench)
    parity = [ln.strip() for ln in _help_blocks("parity", capsys)["--impl"].splitlines()]
    starts = [ln.split(":", 1)[0] for ln in parity if ln.split(":", 1)[0] in IMPLS]
    assert starts == list(IMPLS), parity  # each on a line of its own, in the registry's order
    assert "(default: cuda)" in parity[0]


def test_top_level_help_has_no_markup(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "`" not in out and "kdtree-lab" in out


def test_every_count_and_size_argument_is_bounded():
    """An integer argument of a command is parsed by a bounded type, a seed too (0 to 2**32 - 1, what numpy's and
    torch's generators take); a float one by a finite type."""
    unbounded = [(name, a.option_strings[0]) for name, a in _options() if a.type in (int, float)]
    assert not unbounded, unbounded
    seeds = [(name, a.type.__name__) for name, a in _options() if a.dest == "seed"]
    assert seeds and all(t == "an integer from 0 to 4294967295" for _, t in seeds), seeds


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
    assert f"warning: --sglang-log {early}: none of SGLang's memory lines (Load weight begin" in err


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


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_budget_refuses_an_unsafe_fraction_with_no_launch_line_and_exit_3(json_flag, capsys):
    from kdtree_lab.budget.calculator import compute
    from kdtree_lab.budget.inputs import BudgetInputs

    res = compute(BudgetInputs())
    safe, serve = res.safe_fraction, res.serve_fraction
    assert main(["budget", "--mem-fraction", "0.99", *json_flag]) == 3
    out, err = capsys.readouterr()
    assert err.startswith("kdtree-lab budget: --mem-fraction 0.990 is not safe: leaves") and \
        err.rstrip().endswith(f"use {serve:.3f} to {safe:.3f}") and len(err.strip().splitlines()) == 1, err
    assert "KDTREE_VERIFY" not in err and "--mem-fraction-static 0.990" not in out
    if json_flag:  # the result, without a launch line; proposals carry theirs, each at its own safe fraction
        data = json.loads(out)
        assert data["launch_line"] == ""
    else:  # the answer is the one line
        assert out == ""
    assert main(["budget", "--mem-fraction", f"{safe:.3f}"]) == 0  # the safe one it names gets its lines
    assert f"--mem-fraction-static {safe:.3f}" in capsys.readouterr().out


def test_build_table_is_aligned_and_names_are_demangled(monkeypatch, capsys):
    from kdtree_lab.core.display import aligned_table
    from kdtree_lab.kernels.build import _short

    assert _short("_ZN3kdt15mma_peak_kernelEiPf") == "mma_peak_kernel"
    assert _short("_ZN3kdt19verify_sm120_kernelILi32ELi2ELb1EEEvNS_6ParamsE") == "verify_sm120_kernel<32,2,true>"
    text = aligned_table([{"kernel": "a", "registers": 5}, {"kernel": "verify_sm120_kernel<32,2>", "registers": 232}])
    lines = text.splitlines()
    assert [len(ln) for ln in lines] == [len(lines[0])] * 4, text  # every row as wide as the header: aligned
    assert lines[2].endswith("  5") and lines[3].endswith("232")  # numbers right-aligned under their header


def test_parity_refuses_a_cuda_impl_without_a_gpu(capsys):
    import torch

    from kdtree_lab.cli.main import main

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["parity", "--impl", "cuda_sm120"]) == 3  # well-formed; this machine cannot serve it
    assert "--impl cuda_sm120: expected a CUDA GPU, found none here" in capsys.readouterr().err


def _cli_without_gpu(*args, interpret=True):
    """The command as a CPU user runs it: no GPU visible, TRITON_INTERPRET set only when asked."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"CUDA_VISIBLE_DEVICES": ""}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([sys.executable, "-m", "kdtree_lab", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("argv,interpret,line", [
    (["--device", "cuda", "--impl", "triton"], True, "kdtree-lab parity: --device cuda: expected a CUDA GPU, found "
                                                     "none here (torch "),
    (["--impl", "cuda_sm120"], True, "kdtree-lab parity: --impl cuda_sm120: expected a CUDA GPU, found none here"),
    (["--device", "cpu", "--impl", "cuda"], True, "kdtree-lab parity: --impl cuda: expected a CUDA GPU, found "
                                                  "--device cpu; on a CPU run TRITON_INTERPRET=1 kdtree-lab parity"),
    (["--impl", "triton"], False, "kdtree-lab parity: --impl triton on a CPU: expected TRITON_INTERPRET=1 in the "
                                  "environment (Triton's interpreter), found it unset; run TRITON_INTERPRET=1"),
])
def test_parity_on_a_cpu_refuses_what_needs_a_gpu_or_the_interpreter_in_one_line(argv, interpret, line):
    done = _cli_without_gpu("parity", *argv, "--cases", "1", "--no-edge", interpret=interpret)
    assert done.returncode == 3 and done.stderr.startswith(line), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout, done.stderr


def test_run_refuses_a_gpu_profile_without_a_gpu_and_an_unwritable_out(capsys, tmp_path):
    import torch

    from kdtree_lab.cli.main import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", "--only", "00", "--out", str(blocker / "run")]) == 2
    assert f"--out {blocker / 'run'}: expected a writable directory" in capsys.readouterr().err
    if torch.cuda.is_available():
        return
    assert main(["run", "--profile", "h200", "--only", "00"]) == 3
    assert "--profile h200: expected a CUDA GPU, found none" in capsys.readouterr().err


def test_parity_refuses_a_pool_for_an_impl_that_does_not_serve_it(capsys):
    from kdtree_lab.cli.main import main

    assert main(["parity", "--impl", "cuda_sm120_fp8", "--kv-dtype", "bf16", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--kv-dtype bf16: impl cuda_sm120_fp8 serves fp8 KV pools, not bf16" in err and "Traceback" not in err


def test_audit_cli_names_an_fp8_declaration_over_a_bf16_pool(capsys):
    from kdtree_lab.cli.main import main

    assert main(["audit", "--declare-kv-dtype", "fp8_e4m3", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    bad = [i for i in data["invariants"] if not i["ok"]]
    assert [i["name"] for i in bad] == ["kv_pool_dtype"] and "found bfloat16" in bad[0]["detail"]
    assert main(["audit", "--kv-dtype", "fp8", "--k-scale", "0.5", "--declare-kv-dtype", "fp8_e4m3"]) == 0


@pytest.mark.parametrize("argv,needle", [
    (["--tp", "3"], "kdtree-lab speculate: argument --tp: expected a divisor of the model's 64 heads, found 3"),
    (["--model", "llama"], "argument --model: expected one of deepseek-v2-lite, deepseek-v3, kimi-k2, found 'llama'"),
    (["--accept-length", "2.3"], "--accept-length and --accept-nodes: expected both"),
    (["--accept-length", "5", "--accept-nodes", "4"], "acceptance length: a chain of 4 nodes commits between 1 and 4"),
    (["--step-ms", "12"], "argument --step-context: a measured step time needs the context"),
    (["--step-context", "4096"], "argument --step-context: applies with --step-ms only"),
    (["--nodes", "100"], "argument --nodes: expected tree sizes from 2 to 64 (the largest the verify kernels were "
                         "timed at; below 4, the smallest, a tree takes the 4-node time), found 100"),
    (["--batch", "100"], "argument --batch: expected 1 to 48 (the grid of ours times), found 100"),
])
def test_speculate_refuses_bad_input_in_one_line(argv, needle, capsys):
    from kdtree_lab.cli.main import main

    assert main(["speculate", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_doctor_says_a_cpu_torch_build_in_words(capsys):
    import re
    from dataclasses import replace

    from kdtree_lab.lab.doctor import collect, render

    env = collect()
    cpu = render(replace(env, torch="2.13.0+cpu", torch_cuda=None))
    assert "2.13.0+cpu (a CPU build, no CUDA)" in cpu and "None" not in cpu
    assert "2.13.0+cu130 (built for CUDA 13.0)" in render(replace(env, torch="2.13.0+cu130", torch_cuda="13.0"))
    shown = render(replace(env, torch_arch_list=["sm_90", "sm_120"], sm120_in_torch=True))
    assert re.search(r"sm_120 in torch arch list +yes", shown) and "True" not in shown


def test_tables_say_yes_no_and_separate_thousands():
    from kdtree_lab.core.display import aligned_table, fmt, markdown_table

    rows = [{"config": "a", "fits": {"sm_120a": True, "sm_90a": False}, "safe": True, "KV tokens": 287588}]
    for text in (markdown_table(rows), aligned_table(rows)):
        assert "sm_120a yes, sm_90a no" in text and "287,588" in text
        assert "True" not in text and "False" not in text
    assert fmt(False) == "no" and fmt(1234567) == "1,234,567"


def test_the_static_budget_widget_separates_thousands():
    """What notebook 04 stores: no bare 6-digit token counts outside the launch lines."""
    import re

    from kdtree_lab.budget.widget import static

    text = re.sub(r"<code>.*?</code>", "", static())
    assert not re.findall(r"(?<![\d.,])\d{5,}(?![\d.,])", re.sub(r'data-fraction="[\d.]+"', "", text)), text
    assert re.search(r"\d{1,3},\d{3}", text)


def test_bench_shape_times_exactly_the_shapes_named_with_every_impl(monkeypatch, tmp_path, capsys):
    """bench --shape: each B,L,N,H[,KV] with every --impl, under the name "shapes", in the JSON --out writes (the
    GPU work replaced: what reaches run_items is the contract)."""
    import torch

    from kdtree_lab.checks import bench
    from kdtree_lab.checks.roofline import Shape

    seen = {}

    def fake_run_items(name, items, **kw):
        seen.update(name=name, items=items, checkpoint=kw.get("checkpoint"))
        return {"preset": name, "ceilings": {"copy_gbps": 1.0, "gemm_tflops": 1.0}, "sglang": None, "rows": []}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "run_items", fake_run_items)
    out = tmp_path / "ab.json"
    code = main(["bench", "--shape", "1,200000,4,8,fp8", "--shape", " 8, 32768, 16, 8 ", "--impl",
                 "cuda_sm120_e4m3_32,cuda", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert seen["name"] == "shapes"
    assert seen["items"] == [(Shape(1, 200_000, 4, 8, kv="fp8"), ["cuda_sm120_e4m3_32", "cuda"]),
                             (Shape(8, 32_768, 16, 8), ["cuda_sm120_e4m3_32", "cuda"])]
    assert seen["checkpoint"] == out.with_suffix(".partial.json")
    assert json.loads(out.read_text())["preset"] == "shapes"
