"""A stand-in for class setup's slowest step, shared by the class-mode tests (and their
`quick_setup` fixture in conftest.py): they check where the setup writes, not what pip
installs."""

from __future__ import annotations

import sys
from pathlib import Path


def linked_environment(root: Path, python: str) -> None:
    """Stands in for build_environment: env/bin/python runs this test's interpreter."""
    (root / "env" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "env" / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (root / "env" / "bin" / "python").chmod(0o755)
