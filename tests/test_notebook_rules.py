"""Every notebook is stored without outputs, has kernelspec python3, exactly one `parameters` cell, library calls
only, and a last cell that writes its results JSON; the manifest lists exactly the notebooks on disk."""

import ast

import nbformat
import pytest

from kdtree_lab.core.paths import NOTEBOOKS
from kdtree_lab.lab.runner import manifest

NOTEBOOK_PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
MAX_CELL_LINES = 25


def test_manifest_matches_files():
    assert [e.name for e in manifest()] == [p.stem for p in NOTEBOOK_PATHS]
    for e in manifest():
        assert e.needs_gpu in ("no", "optional", "yes"), e


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.stem)
def test_notebook_rules(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c in code:
        assert not c.get("outputs"), f"{path.name}: a cell has stored outputs"
        assert c.get("execution_count") is None, f"{path.name}: a cell has an execution count"
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{path.name}: expected one parameters cell, found {len(params)}"
    tree = ast.parse(params[0].source)
    assert all(isinstance(n, ast.Assign) for n in tree.body), "parameters cell must hold plain assignments"
    names = {t.id for n in tree.body for t in n.targets}
    assert "run_dir" in names
    for line in params[0].source.splitlines():
        assert "#" in line, f"{path.name}: parameter line without a help comment: {line!r}"
    assert "save_results(run_dir" in code[-1].source, f"{path.name}: last cell must write the results JSON"
    for c in code:
        body = ast.parse(c.source).body
        assert not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in body), \
            f"{path.name}: define functions in kdtree_lab, not in the notebook"
        assert len(c.source.splitlines()) <= MAX_CELL_LINES, f"{path.name}: a cell over {MAX_CELL_LINES} lines"
