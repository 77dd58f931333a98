"""Host-side checks of the kernels' shared-memory layouts (kernels/checks/*.cpp), compiled with the machine's C++
compiler from the same layout headers the kernels include, and run: every ldmatrix hands each thread the elements
its mma.sync fragment expects, the loads cover the tile once, no bank conflicts. No GPU needed."""

import shutil
import subprocess

import pytest

from kdtree_lab.core.paths import ROOT

CHECKS = sorted((ROOT / "kernels" / "checks").glob("*.cpp"))


@pytest.mark.parametrize("source", CHECKS, ids=[p.stem for p in CHECKS])
def test_layout_check_passes(source, tmp_path):
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    assert cxx, "no C++ compiler on PATH (nvcc needs one too): install g++"
    exe = tmp_path / source.stem
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-o", str(exe), str(source)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip().endswith("layout ok"), run.stdout[-2000:]

