"""Which PyTorch names real programs use, and how often: scan Python files (e.g. a checkout of
pytorch/examples) for ``torch.*``, ``torch.nn.*`` (through their import aliases) and for
attributes that are Tensor method names, and count the files each name appears in.

    python tests/compat/usage_scan.py DIR...   # prints "count qualified.name" lines, missing first

Used to choose which absent names to write first (see docs/porting_absent.toml).
"""

import ast
import sys
from collections import Counter
from pathlib import Path

_TOPS = ("torch", "torchvision", "torchaudio")


def _aliases(tree):
    al = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in _TOPS:
                    if a.asname:
                        al[a.asname] = a.name
                    else:
                        al[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in _TOPS:
            for a in node.names:
                al[a.asname or a.name] = f"{node.module}.{a.name}"
    return al


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def scan_file(path, tensor_names):
    """Set of qualified names used in one file (``torch.Tensor.x`` for method-like uses)."""
    try:
        tree = ast.parse(Path(path).read_text(errors="replace"))
    except SyntaxError:
        return set()
    al = _aliases(tree)
    used = set(al.values())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            d = _dotted(node)
            if d is not None:
                head, _, rest = d.partition(".")
                if head in al:
                    used.add(al[head] + ("." + rest if rest else ""))
                    continue
            if node.attr in tensor_names:
                used.add("torch.Tensor." + node.attr)
    return used


def scan(paths, tensor_names):
    files = Counter()
    for p in paths:
        p = Path(p)
        for f in ([p] if p.is_file() else sorted(p.rglob("*.py"))):
            for name in scan_file(f, tensor_names):
                files[name] += 1
    return files


if __name__ == "__main__":
    import torch

    tnames = {n for n in dir(torch.Tensor) if not n.startswith("_")}
    for name, n in scan(sys.argv[1:], tnames).most_common():
        print(n, name)
