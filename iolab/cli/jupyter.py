"""`python -m iolab jupyter` (make jupyter): JupyterLab on the learner's own copies of the
notebooks, in the workspace.

JupyterLab saves a notebook when it is edited or run; the committed notebooks are the lab's
reference, recorded on a described machine and changed only by `make record`. So a learner
works on copies in <workspace>/lab/jupyter/: each is copied once, and a copy the learner has
changed is never overwritten (a newer committed one is named, with how to get it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.lab_dirs import lab_owned_dir, results_dir, tool_caches
from iolab.core.workspace import repo_root

#: The folder of the learner's copies, inside <workspace>/lab.
COPIES_DIRNAME = "jupyter"


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "jupyter",
        help="JupyterLab on your own copies of the notebooks (make jupyter)",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    parser.add_argument(
        "--no-launch", action="store_true", help="only make the copies and say where they are"
    )
    parser.set_defaults(func=main)


def learner_copies() -> tuple[Path, list[str], list[str]]:
    """Copy the committed notebooks the learner does not have yet into the workspace.

    Returns the folder, the names copied now, and the names whose committed notebook is newer
    than the learner's copy (kept as it is: it may hold the learner's work).
    """
    target = lab_owned_dir(results_dir() / COPIES_DIRNAME)
    copied, newer = [], []
    for notebook in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        copy = target / notebook.name
        if not copy.exists():
            shutil.copy2(notebook, copy)
            copied.append(notebook.name)
        elif notebook.stat().st_mtime > copy.stat().st_mtime:
            newer.append(notebook.name)
    return target, copied, newer


def main(args: argparse.Namespace) -> int:
    target, copied, newer = learner_copies()
    print(
        f"your notebooks: {target} ({len(copied)} copied now; the committed ones in "
        "notebooks/ stay as they are)"
    )
    if newer:
        print(
            f"newer in notebooks/ than your copy: {', '.join(newer)}; to start one afresh, "
            f"delete your copy in {target} and run `make jupyter` again"
        )
    if args.no_launch:
        return 0
    jupyter = Path(sys.executable).with_name("jupyter")
    if not jupyter.exists():
        raise LabError(
            f"JupyterLab is not installed beside {sys.executable}; run `make "
            "jupyter`, which installs the lab's requirements first"
        )
    tool_caches()
    sys.stdout.flush()
    os.execv(jupyter, [str(jupyter), "lab", str(target)])
    return 0  # not reached: JupyterLab replaces this process
