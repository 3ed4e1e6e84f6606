"""Run every ```python block of the site's hand-written pages, each as its own script in a
temporary directory, and fail if one raises. `nox -s docs` runs it before building, so the
examples in the guides stay correct for the installed packages.

    python docs/tools/run_snippets.py [PAGE.md ...]     (default: every page under docs/)
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def main(pages):
    pages = [Path(p) for p in pages] or sorted(DOCS.rglob("*.md"))
    failed = 0
    for page in pages:
        for i, code in enumerate(BLOCK.findall(page.read_text())):
            start = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="fiamma-snippet-") as tmp:
                script = Path(tmp) / "snippet.py"   # a file: worker processes re-import it
                script.write_text(code)
                r = subprocess.run([sys.executable, script.name], cwd=tmp, capture_output=True,
                                   text=True, timeout=600)
            name = f"{page.relative_to(DOCS) if page.is_relative_to(DOCS) else page} #{i + 1}"
            if r.returncode:
                failed += 1
                print(f"FAIL {name}\n{code}\n{r.stdout[-2000:]}{r.stderr[-4000:]}")
            else:
                print(f"ok   {name} ({time.perf_counter() - start:.1f} s)")
    if failed:
        sys.exit(f"{failed} documentation example(s) failed")


if __name__ == "__main__":
    main(sys.argv[1:])
