"""A fraction that cannot start is never safe (issue 45, item 2): below the weights' share (G x fraction <= what the
weights and loading take), or leaving a KV pool that holds no request of the context asked, the budget refuses it
with one line that says why and names the fractions to use, in the library, the CLI (exit 3, no launch line) and
the widget; malformed or out-of-range fractions are exit 2."""

from dataclasses import replace

import pytest

from kdtree_lab.budget.calculator import compute
from kdtree_lab.budget.inputs import BudgetInputs
from kdtree_lab.budget.scenario import REFERENCE
from kdtree_lab.cli.main import main

BASE = compute(REFERENCE)
SHARE = BASE.loaded_bytes / BASE.g_bytes  # G x SHARE is exactly what the weights take: no pool


@pytest.mark.parametrize("fraction", [0.0001, 0.5, SHARE, BASE.start_fraction - 0.001], ids=str)
def test_below_the_weights_share_cannot_start_and_is_never_safe(fraction):
    r = compute(replace(REFERENCE, mem_fraction=fraction))
    assert r.kv_tokens == 0 and not r.starts and not r.fraction_is_safe and r.launch_line == ""
    line = r.refusal()
    assert "cannot start" in line and "\n" not in line
    assert f"the smallest fraction that starts is {BASE.start_fraction:.3f}" in line
    assert f"the largest safe one {BASE.safe_fraction:.3f}" in line and "is safe" not in r.verdict()
    assert r.launch_text().startswith("no launch line: ")


def test_the_smallest_fraction_that_starts_starts():
    at = compute(replace(REFERENCE, mem_fraction=BASE.start_fraction))
    assert at.kv_tokens >= 1 and at.starts
    assert not at.fraction_is_safe and "less than one 200,000-token request" in at.refusal()  # starts, serves none
    served = compute(replace(REFERENCE, mem_fraction=BASE.serve_fraction))
    assert served.fraction_is_safe and served.kv_tokens >= REFERENCE.context


def test_one_below_one_leaves_no_slack():
    r = compute(replace(REFERENCE, mem_fraction=1 - 1e-9))
    assert r.starts and not r.fraction_is_safe
    assert r.refusal().endswith(f"use {BASE.serve_fraction:.3f} to {BASE.safe_fraction:.3f}")


@pytest.mark.parametrize("fraction", ["0.0001", "0.5", repr(SHARE), "0.9999999"])
def test_cli_refuses_an_unsafe_fraction_with_one_line_and_exit_3(fraction, capsys):
    assert main(["budget", "--mem-fraction", fraction]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"kdtree-lab budget: --mem-fraction ")
    assert "launch" not in err.replace("no launch line", "") and "KDTREE_VERIFY" not in err
    assert "use " in err or "the smallest fraction that starts is" in err


@pytest.mark.parametrize("fraction,says", [("0", "expected a value in (0, 1), found 0.0"),
                                           ("1", "expected a value in (0, 1), found 1.0"),
                                           ("1.5", "expected a value in (0, 1), found 1.5"),
                                           ("-0.1", "expected a value in (0, 1), found -0.1"),
                                           ("nan", "expected a finite number, found 'nan'"),
                                           ("abc", "expected a finite number, found 'abc'")])
def test_cli_refuses_a_fraction_outside_0_1_with_exit_2(fraction, says, capsys):
    try:
        code = main(["budget", "--mem-fraction", fraction])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert f"argument --mem-fraction: {says}" in err and err.count("\n") == 1, err


def test_cli_answers_a_safe_fraction_with_the_launch_lines_and_exit_0(capsys):
    assert main(["budget", "--mem-fraction", f"{BASE.serve_fraction:.3f}"]) == 0
    out = capsys.readouterr().out
    assert f"fraction {BASE.serve_fraction:.3f} is safe" in out and "KDTREE_VERIFY=validate" in out


def test_widget_never_calls_a_fraction_below_the_weights_share_safe():
    from kdtree_lab.budget import widget

    box = widget.build(replace(REFERENCE, mem_fraction=0.5))
    verdict, launch = box.children[3].value, box.children[4].value
    assert "cannot start" in verdict and "kd-safe" not in verdict and "kd-refused" in verdict
    assert f"the smallest fraction that starts is {BASE.start_fraction:.3f}" in verdict
    assert launch.startswith("<i>no launch line: --mem-fraction 0.500 cannot start") and "KDTREE" not in launch
    static = widget.static(replace(REFERENCE, mem_fraction=0.5))
    assert "cannot start" in static and "kd-safe" not in static


def test_the_default_fraction_is_the_largest_safe_one_and_safe():
    r = compute(BudgetInputs())
    assert r.fraction == r.safe_fraction and r.fraction_is_safe and r.verdict().startswith(
        f"fraction {r.safe_fraction:.3f} is safe")
