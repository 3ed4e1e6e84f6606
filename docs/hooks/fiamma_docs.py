"""MkDocs hook for the fiamma site (mkdocs.yml: ``hooks:``).

- Docstrings show examples as doctest runs (``>>> code`` then output) without a code fence.
  Plain Markdown would render them as text and read ``[1, 2]`` as a link reference, which
  ``--strict`` rejects; a small Markdown preprocessor wraps every such run in a ``pycon``
  fence, for the pages and for the docstrings mkdocstrings renders.
- api/tensor.md: most Tensor methods are installed by the op modules when fiamma is imported,
  so griffe's static analysis cannot see them; the page gets the list from the imported class.
- docs/architecture.md is also read on GitHub, where it links to files outside docs/ (the
  benchmarks and package READMEs); on the site those links point to the pages that hold them.
"""

from __future__ import annotations

import inspect
import logging
import re

from markdown import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

_FENCE = re.compile(r"^\s*(```|~~~)")
_PROMPT = re.compile(r"^(\s*)>>>( |$)")

# repository links (relative to docs/) -> site pages
LINK_MAP = {
    "../benchmarks/README.md": "benchmarks.md",
    "../README.md": "index.md",
    **{f"../packages/{p}/README.md": f"guide/{p}.md"
       for p in ("core", "autograd", "nn", "optim", "data", "vision", "audio")},
}


class _Doctest(Preprocessor):
    def run(self, lines):
        out, i, in_fence = [], 0, False
        while i < len(lines):
            line = lines[i]
            if _FENCE.match(line):
                in_fence = not in_fence
            if in_fence or not _PROMPT.match(line):
                out.append(line)
                i += 1
                continue
            indent = _PROMPT.match(line).group(1)
            out += ["", indent + "```pycon"]
            while i < len(lines) and lines[i].strip():   # the run ends at a blank line
                out.append(lines[i])
                i += 1
            out += [indent + "```", ""]
        return out


class DoctestExtension(Extension):
    def extendMarkdown(self, md):  # noqa: N802 (Markdown's API name)
        # before the fenced-code preprocessor (priority 25), which then sees the fences
        md.preprocessors.register(_Doctest(md), "fiamma_doctest", 30)


@event_priority(100)  # before mkdocstrings copies the Markdown extensions for docstrings
def on_config(config):
    config.markdown_extensions.append(DoctestExtension())
    return config


TENSOR_METHODS = "<!-- tensor-methods -->"
log = logging.getLogger("mkdocs.hooks.fiamma_docs")


def _tensor_methods():
    """Markdown listing the public methods of fiamma.Tensor, grouped by defining module."""
    try:
        import fiamma
    except ImportError as e:  # the docs session installs fiamma; a bare mkdocs may not have it
        log.warning(f"api/tensor.md: fiamma is not importable ({e}); no method list")
        return ""
    groups = {}
    for name in dir(fiamma.Tensor):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(fiamma.Tensor, name)
        mod = getattr(getattr(attr, "__func__", attr), "__module__", None) or "fiamma._tensor"
        mod = {"fiamma._ops._unary": "fiamma._ops.elementwise"}.get(mod, mod)
        groups.setdefault(mod if mod.startswith("fiamma") else "fiamma._tensor", []).append(name)
    lines = [f"All {sum(map(len, groups.values()))} public methods and properties, by the module "
             "that defines them:", ""]
    for mod in sorted(groups):
        names = ", ".join(f"`{n}`" for n in sorted(groups[mod]))
        lines += [f"- **`{mod}`**: {names}", ""]
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    if TENSOR_METHODS in markdown:
        markdown = markdown.replace(TENSOR_METHODS, _tensor_methods())
    for src, dest in LINK_MAP.items():
        markdown = markdown.replace(f"]({src})", f"]({dest})")
    return markdown
