"""Sphinx configuration of the rivet_workflows manual (``make docs`` builds it with warnings as errors)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# autodoc imports rivet_workflows' Django-bound modules: give them the example project's settings
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django  # noqa: E402

django.setup()

project = "rivet_workflows"
author = "rivet_workflows contributors"
release = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
# the design documents ship with the repository (docs/spec/) and are cited as files, not built as pages
exclude_patterns = ["_build", "spec", "conftest.py"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "alabaster"
html_title = "rivet_workflows manual"
