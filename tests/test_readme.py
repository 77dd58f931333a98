"""The README's two set-up commands and its generated tables."""

import importlib.util
import re

from kdtree_lab.core.paths import ROOT

_spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)
BLOCKS, FILES, render = readme_tables.BLOCKS, readme_tables.FILES, readme_tables.render


def test_readme_has_exactly_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", text, re.S).group(1)
    commands = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.split("#")[0].strip()]
    assert commands == ["make run", "make test"]


def test_readme_tables_are_generated_from_committed_results():
    for path in FILES:  # README.md and docs/performance.md
        text = path.read_text()
        assert render(text) == text, f"{path.name} is stale: run python scripts/readme_tables.py"
        for name in BLOCKS:
            assert f"<!-- BEGIN {name} -->\n<!-- END {name} -->" not in text, f"{path.name}: empty {name} block"
    readme = (ROOT / "README.md").read_text()
    assert all(f"<!-- BEGIN {name} -->" in readme for name in ("bench", "targets", "versions"))
