"""What a class folder holds, named once for the setup that makes it and the clean that
removes it (iolab.classmode.setup, iolab.classmode.teardown)."""

from __future__ import annotations

from iolab.core.class_folder import CLASS_FILE

#: Proof that a folder holds a class this user set up (bound to the folder's identity).
CLASS_MARKER = ".iolab-class"
CLASS_MARKER_TEXT = (
    "a class of the storage I/O lab; `python -m iolab class clean` removes "
    "what its setup made here\n"
)
#: Said in the marker when the setup made the class folder itself (clean then removes it).
FOLDER_MADE = "the folder itself was made by the setup\n"
#: What the setup makes in the class folder; `class clean` removes exactly these, in this
#: order: first what makes it a class for learners (class.json, `activate`, the kernel spec),
#: so a clean cut short leaves a folder nobody can join, never an `activate` without its
#: `env`; the class marker goes last, so the next clean finishes the job.
MADE = (
    CLASS_FILE,
    "activate",
    "share",
    "wall.html",
    "queue",
    "wall",
    "env",
    "lab",
    "dataset",
    "images",
)
#: Folders learners write into: group-writable, sticky (each deletes only their own files),
#: setgid (files keep the class's group).
LEARNER_WRITABLE = ("queue", "wall")
#: Heavy steps (fio, mdrates, sweeps, checkpoints) running at once by default: each then gets
#: half of the login-node budget's bytes and files, which the notebooks' sizes fit.
DEFAULT_SLOTS = 2
MAX_SLOTS = 4
