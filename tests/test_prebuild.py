"""scripts/prebuild.py: the libraries a device call would build, built before it and carried; on the device they are
unpacked into build/ where the call's builds find them. The real build here proves the names are the ones a build of
the same tree (a patch applied) computes, so the device finds them."""

import importlib.util
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("prebuild", ROOT / "scripts" / "prebuild.py")
prebuild = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prebuild)

COMMENT_PATCH = """\
--- a/kernels/common/frame.cuh
+++ b/kernels/common/frame.cuh
@@ -1 +1,2 @@
+// a comment: another tree, another library name
 // The frame every verify kernel shares: MLA constants, the launch parameters (Params), where a CTA works
"""


def test_unpack_puts_each_library_whole_beside_its_log_and_keeps_what_is_there(tmp_path):
    folder, build = tmp_path / "pre", tmp_path / "build"
    folder.mkdir()
    for name, body in (("libkdtree_verify-aaaa", b"\x7fELF one"), ("libkdtree_verify-bbbb", b"\x7fELF two"),
                       ("libkdtree_verify-cccc", b"no log beside it")):
        with lzma.open(folder / f"{name}.so.xz", "wb") as f:
            f.write(body)
        if name != "libkdtree_verify-cccc":
            (folder / f"{name}.ptxas.log").write_text(f"log of {name}")
    build.mkdir()
    (build / "libkdtree_verify-bbbb.so").write_bytes(b"built on the device")
    done = prebuild.unpack(folder, build)
    assert [p.name for p in done] == ["libkdtree_verify-aaaa.so"]
    assert (build / "libkdtree_verify-aaaa.so").read_bytes() == b"\x7fELF one"
    assert (build / "libkdtree_verify-aaaa.so").stat().st_mode & 0o111
    assert (build / "libkdtree_verify-aaaa.ptxas.log").read_text() == "log of libkdtree_verify-aaaa"
    assert (build / "libkdtree_verify-bbbb.so").read_bytes() == b"built on the device"  # not overwritten
    assert not (build / "libkdtree_verify-cccc.so").exists()  # a build finds a library only beside its log
    assert sorted(p.name for p in build.iterdir()) == ["libkdtree_verify-aaaa.ptxas.log", "libkdtree_verify-aaaa.so",
                                                       "libkdtree_verify-bbbb.so"]


def test_bad_arguments_get_one_line_and_a_non_zero_exit_and_nothing_is_removed(tmp_path):
    bad = tmp_path / "bad.patch"
    bad.write_text(COMMENT_PATCH.replace("The frame every verify kernel", "Nothing in this tree"))
    kept = tmp_path / "kept"  # a folder of other files named by --out: refused, left as it was
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    last = tmp_path / "last"  # the last good prebuilt folder: a failed run leaves it
    last.mkdir()
    (last / "libkdtree_verify-aaaa.so.xz").write_bytes(b"x")
    for args, words in (([str(bad), "--out", str(last)], f"{bad}: expected a patch that applies"),
                        ([str(tmp_path / "gone.patch"), "--out", str(last)], "expected patch files, found no file"),
                        (["main", "--variants", "normal,fast", "--out", str(last)], "found 'normal,fast'"),
                        (["main", "--variants", ",", "--out", str(last)], "--variants: expected one or more"),
                        (["main", "--out", str(kept)], "found other files: not replaced"),
                        ([], "TREE: expected one or more"),
                        (["--names", str(tmp_path / "gone.patch")], "expected patch files, found no file"),
                        (["--unpack", str(tmp_path / "nowhere")], "--unpack: expected a folder")):
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "prebuild.py"), *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and words in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert (kept / "notes.txt").read_text() == "mine"
    assert [p.name for p in last.iterdir()] == ["libkdtree_verify-aaaa.so.xz"]


def test_a_patch_with_tests_and_docs_is_built_from_its_kernel_and_package_hunks(tmp_path):
    """A patch written to land whole touches tests/ and docs/ too; the copy holds kernels/ and kdtree_lab/ only, so
    those hunks are left out there (git apply --include) and its kernel hunks applied, not the patch refused."""
    readme = (ROOT / "README.md").read_text().splitlines()[0]
    patch = tmp_path / "whole.patch"
    patch.write_text(COMMENT_PATCH + f"""\
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 {readme}
+a line of docs
""")
    copy = prebuild._patched_copy([patch], tmp_path / "tree")
    assert (copy / "kernels" / "common" / "frame.cuh").read_text().startswith("// a comment: another tree")
    assert not (copy / "README.md").exists()


def test_prebuilt_libraries_are_the_ones_a_build_of_the_tree_finds(tmp_path):
    """main and main with a one-comment patch, the normal library: two names, each the one `kdtree_lab build` reports
    for that tree (a copy with the patch applied by git apply, as on the device), and unpacked it is the file that was
    packed (two nvcc runs need not give the same bytes around the same code: the name, a hash of what went in, is what
    the build looks for)."""
    from kdtree_lab.core.cuda_tools import find_nvcc

    if not find_nvcc():
        pytest.skip("nvcc not found: set CUDA_HOME or put nvcc on PATH (kdtree-lab doctor shows what is found)")
    patch = tmp_path / "comment.patch"
    patch.write_text(COMMENT_PATCH)
    out = tmp_path / "pre"
    libs = prebuild.prebuild(["main", str(patch)], ["normal"], out, max_mib=12)
    assert len(libs) == 2 and libs[0].name != libs[1].name
    # --names says the same names without building
    assert [f"{name}.xz" for *_, name in prebuild.names(["main", str(patch)], ["normal"])] == [p.name for p in libs]
    copy = prebuild._patched_copy([patch], tmp_path / "tree")
    report = json.loads(subprocess.run([sys.executable, "-m", "kdtree_lab", "build", "--json"], cwd=copy,
                                       capture_output=True, text=True, check=True).stdout)
    built = Path(report["build"]["library"])
    assert report["build"]["cached"] is False and libs[1].name == f"{built.name}.xz"
    build = tmp_path / "device-build"
    prebuild.unpack(out, build)
    assert (build / built.name).read_bytes() == lzma.decompress(libs[1].read_bytes())
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [p.name for p in libs] + [p.name.replace(".so.xz", ".ptxas.log") for p in libs])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_folder_and_its_staging_folder_are_ignored_by_git():
    """A build takes minutes and stages its libraries in a sibling folder (``..prebuilt.XXXX``, prebuild's
    ``mkdtemp`` prefix) before the rename; neither may be picked up by ``git add -A`` meanwhile (the thirty-first
    session committed a staging folder that way)."""
    stage = Path(tempfile.mkdtemp(prefix="..prebuilt.", dir=ROOT))
    try:
        (stage / "libkdtree_verify-0000000000000000.so.xz").write_bytes(b"x")
        for path in (stage / "libkdtree_verify-0000000000000000.so.xz", ROOT / ".prebuilt" / "a.so.xz"):
            rc = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(path)]).returncode
            assert rc == 0, f"{path.relative_to(ROOT)}: expected git to ignore it"
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def test_names_are_each_variants_and_trees_and_build_nothing(tmp_path):
    """``--names``: one line per (tree, variant), every name distinct (a build switch or a patch is another library),
    main's normal name the one this process's build computes, and none of them built."""
    from kdtree_lab.core.cuda_tools import find_nvcc
    from kdtree_lab.kernels import build

    if not find_nvcc():
        pytest.skip("nvcc not found: set CUDA_HOME or put nvcc on PATH (kdtree-lab doctor shows what is found)")
    patch = tmp_path / "comment.patch"
    patch.write_text(COMMENT_PATCH)
    before = {p.name for p in build.BUILD.iterdir()} if build.BUILD.exists() else set()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "prebuild.py"), "--names", "main", str(patch),
                          "--variants", "normal,timing,phase"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [f"{tree} {v}" for tree in ("main", str(patch))
                                                      for v in ("normal", "timing", "phase")]
    found = [line.split(": ")[1] for line in lines]
    assert len(set(found)) == 6 and all(n.startswith(f"{build.LIB_STEM}-") and n.endswith(".so") for n in found)
    switched = [k for k in build.BUILD_SWITCHES if k in os.environ]
    if not switched:  # this process builds main's normal library under the name --names gave
        assert found[0] == build.library_name()
    assert not [n for n in found if n not in before and (build.BUILD / n).exists()]  # nothing was built
