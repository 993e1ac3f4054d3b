"""Sphinx configuration of repro's manual: `make docs` builds it into site/ (strict: every warning fails, and
offline: furo ships its assets and uses the system's fonts, nothing is fetched), `make docs-serve` serves it.
Why Sphinx with MyST and furo, and how the pages are tested: about.md."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(Path(__file__).resolve().parent / "_ext")]

project = "repro"
author = "the repro authors"
copyright = "the repro authors"
root_doc = "index"
extensions = [
    "myst_parser",  # the pages are Markdown (CommonMark + MyST), as the README was
    "sphinx.ext.autodoc",  # the Python API from its docstrings
    "sphinxarg.ext",  # the commands from repro's argparse parsers
    "reference",  # docs/_ext/reference.py: the config and ledger references, generated from the code
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_ext", "_build"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links are checked: a missing heading fails the build
myst_enable_extensions = ["colon_fence"]
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
html_theme = "furo"
html_title = "repro"
html_copy_source = False
html_show_sourcelink = False
