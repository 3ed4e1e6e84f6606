"""The checkout's entry points agree: README's two commands exist and CI runs the test command.

Skipped when the tests run from a copy outside a checkout.
"""

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CI = REPO / ".ci" / "run"

pytestmark = pytest.mark.skipif(not README.exists() or not CI.exists(),
                                reason="not running from a checkout")


def readme_command(name):
    """The first line of the code block after the `<!-- command: name -->` marker."""
    m = re.search(rf"<!-- command: {name} -->\s*```\w*\n(.+?)\n", README.read_text())
    assert m, f"README.md has no '<!-- command: {name} -->' code block"
    return m.group(1).strip()


def test_ci_runs_exactly_the_readme_test_command():
    command = readme_command("tests")
    lines = [line.strip() for line in CI.read_text().splitlines()]
    assert command in lines, f".ci/run does not run README's test command {command!r}"
    code = [line for line in lines if line and not line.startswith("#")]
    assert code[-1] == command, ".ci/run must end with the test command (its exit status)"


def test_ci_script_is_strict_and_executable():
    text = CI.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert os.access(CI, os.X_OK)


@pytest.mark.parametrize("name", ["main", "tests"])
def test_readme_commands_name_existing_nox_sessions(name):
    command = readme_command(name)
    sessions = re.search(r"nox -s (.+)$", command).group(1).split()
    noxfile = (REPO / "noxfile.py").read_text()
    for session in sessions:
        assert re.search(rf"^def {session}\(session", noxfile, flags=re.M), \
            f"README command {command!r} names a nox session {session!r} that does not exist"
