"""The one way the toolkit builds the activity dataset: by running the scripts a learner runs.

`make lab`, the comparison across places, `make bench` and the tests all need the dataset and
its archive. They run data_generators/generate_data.py and create_archive.py with this
interpreter instead of importing them, so the scripts stay the single implementation (run
alone in the lessons, with their own writer lock, interrupt handling and one-sentence
errors), and a failure arrives here as that sentence.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.samples import Dataset
from iolab.core.workspace import repo_root


def run_generator(script: str, dataset_dir: Path, *options: str, echo: bool = False) -> None:
    """Run data_generators/<script> on `dataset_dir`; `echo` prints the summary it printed.

    A dataset that already verifies is reused by the script, so this is cheap when done.
    """
    proc = subprocess.run(
        [
            sys.executable,
            str(repo_root() / "data_generators" / script),
            "--data",
            str(dataset_dir),
            *options,
        ],
        text=True,
        capture_output=True,
    )
    if echo:
        print(proc.stdout.rstrip())
    if proc.returncode != 0:
        raise LabError(proc.stderr.strip().removeprefix("error: "))


def generate_dataset(
    dataset_dir: Path, files: int | None = None, seed: int | None = None, echo: bool = False
) -> None:
    """Generate (or reuse) the dataset's files and manifest; the scripts' defaults otherwise."""
    options = ["--quiet"]
    if files is not None:
        options += ["--files", str(files)]
    if seed is not None:
        options += ["--seed", str(seed)]
    run_generator("generate_data.py", dataset_dir, *options, echo=echo)


def archive_dataset(dataset_dir: Path, echo: bool = False) -> None:
    """Write (or reuse) data.tar and archive.json of a generated dataset."""
    run_generator("create_archive.py", dataset_dir, echo=echo)


def build_dataset(
    dataset_dir: Path,
    files: int | None = None,
    seed: int | None = None,
    archive: bool = True,
    echo: bool = False,
) -> Dataset:
    """The verified dataset in `dataset_dir` (with its archive unless archive=False)."""
    generate_dataset(dataset_dir, files, seed, echo=echo)
    if archive:
        archive_dataset(dataset_dir, echo=echo)
    return Dataset.at(dataset_dir)
