"""The import cycles of core (packages/core/src/fiamma): the strongly connected components of its
module import graph, from the source (nothing is imported).

An edge A -> B is an ``import`` or ``from ... import`` in module A that names module B of
fiamma (``from fiamma import _dtype`` names fiamma._dtype; ``from fiamma._tensor import
Tensor`` names fiamma._tensor; a name that is not a module names the package it is taken
from). The parent packages Python imports on the way are not edges (every module would then
reach fiamma/__init__.py, which imports the public API). Imports at module level (including
inside ``if``/``try`` at that level) are counted by default; ``--all`` adds the imports inside
functions and methods, which run later but are a dependency all the same.

    python tools/import_cycles.py            # the largest cycle, module-level imports
    python tools/import_cycles.py --all -v   # every import, and the members of each cycle
"""

import argparse
import ast
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "packages", "core", "src")


def modules(root=ROOT):
    """{module name: path} of every .py file under root/fiamma."""
    found = {}
    base = os.path.join(root, "fiamma")
    for dirpath, _dirs, files in os.walk(base):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3].split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            found[".".join(rel)] = os.path.join(dirpath, f)
    return found


def _nested_in_def(tree):
    """The import nodes that sit inside a function or method body."""
    inner = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    inner.add(sub)
    return inner


def imports(name, path, mods, function_level):
    """The fiamma modules that module ``name`` imports."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    inner = _nested_in_def(tree)
    is_pkg = path.endswith("__init__.py")
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if node in inner and not function_level:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in mods:
                    out.add(a.name)
            continue
        if node.level:  # relative
            parts = name.split(".")
            if not is_pkg:
                parts = parts[:-1]
            parts = parts[:len(parts) - node.level + 1]
            src = ".".join(parts + ([node.module] if node.module else []))
        else:
            src = node.module or ""
        if src not in mods:
            continue
        for a in node.names:
            sub = f"{src}.{a.name}"
            out.add(sub if sub in mods else src)
    out.discard(name)
    return out


def graph(function_level=False, root=ROOT):
    mods = modules(root)
    return {m: imports(m, p, mods, function_level) for m, p in mods.items()}


def components(g):
    """Strongly connected components of graph g (Tarjan, iterative), largest first."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = 0
    for v0 in g:
        if v0 in index:
            continue
        work = [(v0, iter(sorted(g[v0])))]
        index[v0] = low[v0] = counter
        counter += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(sorted(comp))
    return sorted(comps, key=len, reverse=True)


def largest_cycle(function_level=False, root=ROOT):
    """The members of the largest import cycle (a component of more than one module)."""
    comps = [c for c in components(graph(function_level, root)) if len(c) > 1]
    return comps[0] if comps else []


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--all", action="store_true", help="count imports inside functions too")
    p.add_argument("-v", action="store_true", help="list the members of each cycle")
    p.add_argument("--root", default=ROOT, help="the src folder holding fiamma/")
    args = p.parse_args(argv)
    g = graph(args.all, args.root)
    comps = [c for c in components(g) if len(c) > 1]
    kind = "all imports" if args.all else "module-level imports"
    print(f"{len(g)} modules, {sum(map(len, g.values()))} import edges ({kind}); "
          f"cycles: {[len(c) for c in comps]}")
    if args.v:
        for c in comps:
            print(f"\n{len(c)} modules:\n  " + "\n  ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
