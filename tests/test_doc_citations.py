"""Citations of the docs resolve: every `docs/<page>.md, "Section"` quoted in the repository's prose, comments and
docstrings names a heading (or a bold or italic label) that is on that page, and every Markdown link between the
docs pages lands on a page and a heading anchor that exist."""

import re

import pytest

from kdtree_lab.core.paths import ROOT

DOCS = ROOT / "docs"
# Where citations are written: the README and docs, the code's comments and docstrings, the results folders' READMEs.
# Patches and kept sources under data/results/ are records of older trees and are not checked.
SOURCES = ([ROOT / "README.md", *DOCS.rglob("*.md"), *(ROOT / "data" / "results").glob("*/*/README.md")]
           + [p for d in ("kdtree_lab", "scripts", "kernels") for ext in ("py", "cu", "cuh", "h", "sh")
              for p in (ROOT / d).rglob(f"*.{ext}")])
CITATION = re.compile(r'docs/([\w-]+)\.md`?(?:,| \(|, \(|\s)\s*"([^"]+)"((?:,\s*"[^"]+")*)')


def _joined(path) -> str:
    """The file as one line of prose: comment markers and line breaks dropped, Python's split string literals
    rejoined, so a citation wrapped over lines reads as written."""
    lines = [re.sub(r"^\s*(?://+|#+|\*)?\s?", "", ln) for ln in path.read_text(errors="replace").splitlines()]
    text = " ".join(lines)
    if path.suffix == ".py":
        text = re.sub(r'"\s+"', "", text.replace('\\"', '"'))
    return " ".join(text.split())


def _labels(page: str) -> list[str]:
    """The names a citation of ``page`` may use: its headings and its bold or italic labels."""
    text = (DOCS / f"{page}.md").read_text()
    found = re.findall(r"(?m)^#{1,6} (.+)$", text) + re.findall(r"\*\*([^*]+)\*\*", text)
    found += re.findall(r"(?<![*\w])\*([^*\s][^*]*)\*(?![*\w])", text)
    return [" ".join(f.split()) for f in found]


def _citations():
    for path in SOURCES:
        for m in CITATION.finditer(_joined(path)):
            names = [m.group(2), *re.findall(r'"([^"]+)"', m.group(3))]
            for name in names:
                yield str(path.relative_to(ROOT)), m.group(1), " ".join(name.split())


def test_citations_are_found():
    cites = list(_citations())
    assert len(cites) > 30, "the citation pattern no longer matches how the repository cites its docs"
    assert ("kdtree_lab/kernels/launch_plan.py", "performance", "Per-shape choice on sm_120") in cites


def test_every_cited_section_is_on_its_page():
    missing = []
    labels = {}
    for where, page, name in _citations():
        if not (DOCS / f"{page}.md").exists():
            missing.append(f"{where}: docs/{page}.md does not exist")
            continue
        labels.setdefault(page, _labels(page))
        if not any(name in label for label in labels[page]):
            missing.append(f'{where}: docs/{page}.md has no section "{name}"')
    assert not missing, "\n".join(missing)


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens,
    a repeated anchor numbered -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for title in re.findall(r"(?m)^#{1,6} (.+)$", re.sub(r"(?ms)^```.*?^```", "", text)):
        base = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")) + ["../README.md"])
def test_links_between_docs_pages_land(page):
    text = (DOCS / page).read_text()
    bad = []
    for target, anchor in re.findall(r"\]\(([\w./-]*\.md|)(?:#([\w-]+))?\)", text):
        dest = (DOCS / page).parent / target if target else DOCS / page
        if not dest.exists():
            bad.append(f"{target}: no such page")
        elif anchor and anchor not in _anchors(dest.read_text()):
            bad.append(f"{target}#{anchor}: no such heading")
    assert not bad, f"{page}: " + "; ".join(bad)
