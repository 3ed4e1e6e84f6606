"""Every ```python example in README.md and in each package's README.md runs as written.

Each block is saved as a script in a temporary folder and run in a fresh interpreter with the
installed packages (fenced as ```python-no-run, an example that needs a download or a user's
file is shown but not run). A package that is not installed skips its README's examples.
"""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
READMES = [REPO / "README.md"] + sorted(REPO.glob("packages/*/README.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _examples():
    for readme in READMES:
        if not readme.is_file():
            continue
        for i, m in enumerate(BLOCK.finditer(readme.read_text()), 1):
            rel = readme.relative_to(REPO)
            yield pytest.param(readme, m.group(1), id=f"{rel.parent.name or 'root'}-{i}")


def _module_of(readme):
    """The import name of the package a README belongs to (None for the root README)."""
    if readme.parent == REPO:
        return None
    key = readme.parent.name
    if key == "core":
        return "fiamma"
    src = readme.parent / "src" / "fiamma"
    if not (src / key).is_dir() and src.is_dir():  # fiamma-export ships fiamma.jit/fiamma.onnx
        subs = sorted(d.name for d in src.iterdir() if (d / "__init__.py").is_file())
        if subs:
            return f"fiamma.{subs[0]}"
    return f"fiamma.{key}"


@pytest.mark.parametrize("readme,code", list(_examples()))
def test_readme_example_runs(readme, code, tmp_path):
    module = _module_of(readme)
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, (f"{readme.relative_to(REPO)} example failed:\n{code}\n"
                                  f"--- stderr ---\n{proc.stderr[-3000:]}")


def test_every_package_readme_has_a_runnable_example():
    for readme in READMES[1:]:
        assert BLOCK.search(readme.read_text()), f"{readme} has no ```python example"
