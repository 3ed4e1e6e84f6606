"""MkDocs hook for the fiamma site (mkdocs.yml: ``hooks:``).

- Docstrings show examples as doctest runs (``>>> code`` then output) without a code fence.
  Plain Markdown would render them as text and read ``[1, 2]`` as a link reference, which
  ``--strict`` rejects; a small Markdown preprocessor wraps every such run in a ``pycon``
  fence, for the pages and for the docstrings mkdocstrings renders.
- docs/architecture.md is also read on GitHub, where it links to files outside docs/ (the
  benchmarks and package READMEs); on the site those links point to the pages that hold them.
"""

from __future__ import annotations

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


def on_page_markdown(markdown, page, config, files):
    for src, dest in LINK_MAP.items():
        markdown = markdown.replace(f"]({src})", f"]({dest})")
    return markdown
