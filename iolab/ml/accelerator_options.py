"""The simulated accelerator's warm-up steps: apart from iolab.ml.accelerator (which needs
pandas), so that checking `python -m iolab accelerator --steps` imports no heavy package."""

from __future__ import annotations

#: Steps excluded at the start, as DLIO's metric_exclude_start_steps default.
SKIP_FIRST = 1
