"""mkdocs.yml agrees with docs/: every page in the nav exists, every page is in the nav, and
the files the site pulls in from elsewhere exist. Cheap (no mkdocs needed); `nox -s docs`
builds the site itself with --strict.

Skipped when the tests run from a copy outside a checkout.
"""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MKDOCS = REPO / "mkdocs.yml"
DOCS = REPO / "docs"

pytestmark = pytest.mark.skipif(not MKDOCS.exists(), reason="not running from a checkout")


def nav_files():
    """The .md paths of the `nav:` block (a YAML subset: `- Title: path.md` lines)."""
    text = MKDOCS.read_text()
    nav = text[text.index("\nnav:") :]
    return re.findall(r"^\s+- (?:[^:\n]+: )?([\w./-]+\.md)\s*$", nav, re.M)


def test_nav_pages_exist():
    files = nav_files()
    assert len(files) >= 20, files
    missing = [f for f in files if not (DOCS / f).is_file()]
    assert not missing, f"mkdocs.yml nav names pages that do not exist under docs/: {missing}"
    assert len(files) == len(set(files)), "a page appears twice in the nav"


def test_every_page_is_in_nav():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages - set(nav_files()) == set(), "pages under docs/ missing from mkdocs.yml nav"


def test_hooks_and_snippets_exist():
    text = MKDOCS.read_text()
    hooks = re.findall(r"^hooks:\n((?:\s+- .+\n)+)", text, re.M)
    for line in "".join(hooks).split("\n"):
        if line.strip():
            assert (REPO / line.strip()[2:]).is_file(), line
    for page in DOCS.rglob("*.md"):
        for target in re.findall(r'^--8<-- "([^"]+)"', page.read_text(), re.M):
            assert (REPO / target).is_file(), f"{page.name} includes missing {target}"


def _module_exists(dotted):
    """Whether some package's src/ has the module (or a prefix of it: `mod.Class`)."""
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):  # fiamma itself does not count
        rel = Path(*parts[:n])
        for src in REPO.glob("packages/*/src"):
            if (src / rel).with_suffix(".py").is_file() or (src / rel / "__init__.py").is_file():
                return True
    return False


def test_api_pages_name_existing_modules():
    targets = [(page.name, t) for page in DOCS.rglob("*.md")
               for t in re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.M)]
    assert targets, "no mkdocstrings directives found"
    bad = [(name, t) for name, t in targets if len(t.split(".")) < 2 or not _module_exists(t)]
    assert not bad, f"API pages document modules that do not exist: {bad}"
