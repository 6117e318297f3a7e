"""Writing checkpoints without stalling training: bursts, fsync, atomic rename, background copies.

Training writes nothing for many steps, then the whole model state at once: a burst. While
the save call runs, the accelerator waits, so what matters is how long the training loop is
*blocked*, not the storage's average bandwidth. This package measures that on a simulated
loop: K steps (each a sleep), a checkpoint every M steps, and one of these ways to save:

* synchronous: the save call writes straight to the target (the workspace on local disk, the
  workspace mounted over sshfs, or any directory), with or without fsync;
* background: the save call writes to local disk, then a thread copies the file to the slow
  target while the next steps run; the next save first waits for that copy.

One concern per module:

* budget: how big a checkpoint may be here (login node or compute node);
* state: the model state, exact in size, incompressible and reproducible;
* writing: atomic, hashed writes and the sha256 sidecar that marks a file complete;
* formats: numpy records (torch.save optional), and loading a verified checkpoint;
* resume: which checkpoints are complete, and rotation to the newest N;
* copies: verified background copies in a thread;
* loop: the simulated training loop and what blocks it;
* compare: one measured run per strategy and target (local, sshfs, a directory);
* tables, plots: summaries of runs (plots needs matplotlib and is not imported here).

The command line is iolab.cli.checkpoint. Notebooks use the names below as `ck.<name>`.
"""

from iolab.ml.checkpoint.budget import checked_size
from iolab.ml.checkpoint.compare import TARGETS_HELP, describe, run_strategy, target_dir
from iolab.ml.checkpoint.copies import BackgroundCopier, CopyCancelled, CopyRecord, copy_checkpoint
from iolab.ml.checkpoint.formats import (
    import_torch,
    load_checkpoint,
    save_checkpoint,
    torch_save_checkpoint,
)
from iolab.ml.checkpoint.loop import LoopRun, check_loop, simulate_step, train_and_checkpoint
from iolab.ml.checkpoint.resume import (
    checkpoint_name,
    complete_checkpoints,
    rotate,
    verify_checkpoint,
)
from iolab.ml.checkpoint.state import DEFAULT_LAYERS, DEFAULT_MIB, MIB, model_state, state_bytes
from iolab.ml.checkpoint.tables import copies_frame, summary_frame
from iolab.ml.checkpoint.writing import Saved, fsync_dir, sidecar

__all__ = [
    "checked_size",
    "TARGETS_HELP",
    "describe",
    "run_strategy",
    "target_dir",
    "BackgroundCopier",
    "CopyCancelled",
    "CopyRecord",
    "copy_checkpoint",
    "import_torch",
    "load_checkpoint",
    "save_checkpoint",
    "torch_save_checkpoint",
    "LoopRun",
    "check_loop",
    "simulate_step",
    "train_and_checkpoint",
    "checkpoint_name",
    "complete_checkpoints",
    "rotate",
    "verify_checkpoint",
    "DEFAULT_LAYERS",
    "DEFAULT_MIB",
    "MIB",
    "model_state",
    "state_bytes",
    "copies_frame",
    "summary_frame",
    "Saved",
    "fsync_dir",
    "sidecar",
]
