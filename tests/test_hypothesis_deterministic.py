"""Every package test folder that uses hypothesis loads a deterministic profile from its
conftest.py, so CI runs (each package's tests copied out of the checkout) cannot flake on the
examples chance picks. A static check of the checkout: a new hypothesis suite without the
profile fails here."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_DIRS = sorted(p for p in (ROOT / "packages").glob("*/tests") if p.is_dir())
USES = re.compile(r"^\s*(from hypothesis\b|import hypothesis\b)", re.M)


def _uses_hypothesis(folder):
    return any(USES.search(f.read_text(encoding="utf-8")) for f in folder.rglob("test_*.py"))


@pytest.mark.parametrize("folder", TEST_DIRS, ids=lambda p: p.parent.name)
def test_hypothesis_suites_are_deterministic(folder):
    if not _uses_hypothesis(folder):
        pytest.skip(f"{folder.parent.name} has no hypothesis tests")
    conftest = folder / "conftest.py"
    assert conftest.is_file(), f"{folder} uses hypothesis but has no conftest.py with a profile"
    text = conftest.read_text(encoding="utf-8")
    assert re.search(r"register_profile\([^)]*derandomize=True", text, re.S), \
        f"{conftest}: no settings profile with derandomize=True"
    assert re.search(r"^settings\.load_profile\(", text, re.M), \
        f"{conftest}: the deterministic profile is not loaded"
