"""The class a learner joined: `IOLAB_CLASS` names a folder made by `iolab class setup`.

In a workshop the environment, the dataset and the image samples exist once, in the class
folder, read-only to learners; each learner writes only into a private workspace (0700) on
the place the instructor's setup chose (scratch before home). Heavy steps take turns in the
class's queue, at most `slots` at once, so the login-node budget of one run is the node's
budget divided among the runs that can happen together. `class.json` is written last by the
setup: a folder without it is never taken for a class.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.rename_risk import rename_risk
from iolab.core.storage_areas import storage_area

#: The variable a learner sets (the class's `activate` does) to join a class.
CLASS_ENV = "IOLAB_CLASS"
#: The class's description; its presence is the proof that the setup finished.
CLASS_FILE = "class.json"
CLASS_SCHEMA = 1
#: In a class, the cold-cache and RAM-disk comparisons (lessons 02 and 04) run on a private
#: dataset of this many files (a tenth of the default) that each learner generates, never on
#: the shared one: evicting that would make it cold for the whole class, and a whole copy per
#: learner in /dev/shm would fill the node's memory (iolab.storage.compare).
CLASS_SUBSET_FILES = 730
#: In a class, lesson 09's cold accelerator runs read a private copy of this many image
#: samples (its runs read 16 batches of 8) instead of the class's shared images, which a
#: learner may not evict (iolab.ml.accelerator.sweep_images).
CLASS_SWEEP_SAMPLES = 128


@dataclass(frozen=True)
class ClassFolder:
    """A finished class folder and what its setup decided."""

    root: Path
    name: str
    learners: int
    slots: int
    workspaces_in: str
    made_by: str

    def workspace_base(self) -> Path:
        """Where this learner's workspace goes: the place the setup chose, as it is named
        for this learner (home is theirs; scratch is $SCRATCH as they see it); home for a name
        the setup never chooses."""
        area = storage_area(self.workspaces_in)
        if area is None or area.workspace_rank is None:
            return Path.home()
        return area.directory() or Path.home()

    @property
    def queue(self) -> Path:
        """Tickets of the heavy steps waiting or running (iolab.core.class_queue)."""
        return self.root / "queue"

    @property
    def wall(self) -> Path:
        """One results file per learner, for the class wall."""
        return self.root / "wall"


def read_class(root: Path) -> ClassFolder:
    """The class in `root`, or one sentence on why `root` is not a finished class folder."""
    fix = (
        f"ask your instructor for the class folder's path, or unset {CLASS_ENV} to work on your own"
    )
    try:
        described = json.loads((root / CLASS_FILE).read_text())
        if described.get("schema") != CLASS_SCHEMA:
            raise ValueError("another schema")
        return ClassFolder(
            root=root,
            name=str(described["name"]),
            learners=int(described["learners"]),
            slots=int(described["slots"]),
            workspaces_in=str(described["workspaces_in"]),
            made_by=str(described["made_by"]),
        )
    except FileNotFoundError:
        raise LabError(
            f"{CLASS_ENV}={root} is not a finished class folder (it has no "
            f"{CLASS_FILE}, which `iolab class setup` writes last); {fix}"
        ) from None
    except PermissionError:
        raise LabError(
            f"{CLASS_ENV}={root} cannot be read by you (the class folder belongs to "
            "the class's group); ask your instructor to add you to it"
        ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise LabError(
            f"{root / CLASS_FILE} is not a class description this lab can read; {fix}"
        ) from None


def active_class() -> ClassFolder | None:
    """The class named by IOLAB_CLASS, or None when the learner works alone; refused in one
    sentence where a classmate could swap the class folder (a folder above it writable by
    others without the sticky bit), since learners run its environment and read its data."""
    value = os.environ.get(CLASS_ENV)
    if not value:
        return None
    root = Path(value).expanduser().resolve()
    joined = read_class(root)
    risk = rename_risk(root)
    if risk is not None:
        raise LabError(
            f"{CLASS_ENV}={root} cannot be trusted: {risk}; ask your instructor to move the "
            f"class or have the sticky bit set there (`chmod +t`), or unset {CLASS_ENV} to "
            "work on your own"
        )
    return joined


def concurrent_runs() -> int:
    """How many heavy runs may happen at once on this node: the class's slots, else one."""
    joined = active_class()
    return joined.slots if joined is not None else 1


@contextlib.contextmanager
def heavy_turn(what: str) -> Iterator[str | None]:
    """Inside a class, wait for a turn in the class's queue (the block gets the ticket's
    name, see iolab.core.class_queue.turn); alone, go at once."""
    joined = active_class()
    if joined is None:
        yield None
        return
    from iolab.core.class_queue import turn  # only in a class: every command's start-up

    # passes through here (iolab.core.budget)
    with turn(joined.queue, joined.slots, what) as ticket:
        yield ticket
