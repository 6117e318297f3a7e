"""Sphinx configuration of the lab's site: lessons (MyST) and the executed notebooks.

The source directory is the directory of this file (the repository root, or the staging copy
that `make lab` builds from), so every path below is relative to it. The site must build
with `sphinx-build -W -n` and work offline: nothing is executed at build time (the notebooks
are committed with the outputs of a real run) and no page loads anything from another host.
"""

import html

from docutils import nodes

project = "Storage and file-system I/O for HPC and ML: a hands-on lab"
author = "The storage I/O lab authors"
copyright = "the storage I/O lab authors"

extensions = [
    "sphinx_lesson",  # brings myst_nb, copybutton, togglebutton, tabs and the lesson directives
    "sphinx_rtd_theme_ext_color_contrast",
]

# MyST: `:::{exercise}` fences for the lesson directives, definition lists on the index.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Notebooks are rendered from their stored outputs, never executed while building.
nb_execution_mode = "off"
nb_merge_streams = True
# A notebook's text/markdown output (a table from to_markdown) renders as a table: CommonMark,
# myst-nb's default, has no tables and would show the raw pipes. "myst" (pipe tables) rather
# than "gfm": gfm turns on linkify, which needs linkify-it-py with markdown-it-py 3 (Python 3.10).
nb_render_markdown_format = "myst"
# myst-nb would add require.js and the widget manager from a CDN to a page whose notebook
# carries widget state; the lab uses no widgets, and the site must not load remote scripts.
nb_ipywidgets_js: dict = {}

# Everything that is not a page of the site. Hidden directories (.git, .venv, .ci,
# .pytest_cache with its README.md, .ipynb_checkpoints) are covered by the two dot patterns.
exclude_patterns = [
    "_build",
    "jupyter_execute",
    "workspace",
    "reference/node-runs-recorded",  # what the jobs copied back, read by reference/node-runs.ipynb
    ".venv",
    "*venv*",
    ".*",
    "**/.*",
    "**/.ipynb_checkpoints",
    "tests",
    "demos",
    "data_generators",
    "iolab",
    "README.md",
    "ARCHITECTURE.md",
    "CONTRIBUTING.md",
    ".ci",
    "requirements-lock.txt",
    "requirements-torch.txt",
    "pyproject.toml",
    "notebooks/recorded",
    "requirements.txt",
    "Makefile",
]

html_theme = "sphinx_rtd_theme"
html_title = "Storage and file-system I/O lab"
html_show_sourcelink = False
html_theme_options = {"navigation_depth": 3}
# The lab's own style sheet, linked after the theme's and sphinx-lesson's: wide tables scroll
# inside their own box instead of being cut off or widening the page, and the lesson blocks'
# title icons come from the FontAwesome font the theme ships, not from emoji that a machine
# without an emoji font shows as empty boxes. It loads nothing (no url(), no @import).
html_static_path = ["_static"]
html_css_files = ["lab.css"]

# Commands on the pages are shown without prompts; do not copy line numbers or prompts.
copybutton_exclude = ".linenos, .gp"

# Math is written as its TeX source (see setup below) instead of loading MathJax from a CDN.
html_math_renderer = "tex_source"
# No intersphinx: remote inventories cannot be fetched offline.


def _visit_math_as_tex(self, node):
    """Write math as its TeX source in a <span>/<div>, so no page needs MathJax from a CDN."""
    tag = "div" if node.tagname == "math_block" else "span"
    self.body.append(f'<{tag} class="math notranslate">{html.escape(node.astext())}</{tag}>')
    raise nodes.SkipNode


def setup(app):
    """Register the offline math renderer: a stray formula must not pull in MathJax."""
    app.add_html_math_renderer(
        "tex_source",
        inline_renderers=(_visit_math_as_tex, None),
        block_renderers=(_visit_math_as_tex, None),
    )
