"""The checkpoint command's default size and its targets: apart from iolab.ml.checkpoint
(which needs numpy), so that checking `python -m iolab checkpoint`'s options imports no
heavy package."""

from __future__ import annotations

#: MiB of the model state (iolab.ml.checkpoint.state).
DEFAULT_MIB = 256
#: Where checkpoints may go (iolab.ml.checkpoint.compare.target_dir).
TARGETS_HELP = "local (the workspace), sshfs (the workspace over a loopback mount) or a directory"
