"""A Ctrl-C that lands just after a child started, before the lab kept its handle.

The window is a few microseconds wide in real life, so the tests open it on purpose: the
stand-in for ``subprocess.Popen`` starts the real child, then sends this process SIGINT
before returning. The lab must still stop the child it can no longer see from its stack.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from typing import Any


def popen_then_ctrl_c(started: list[subprocess.Popen]) -> Callable[..., subprocess.Popen]:
    """A ``Popen`` stand-in that records each child in ``started``, then interrupts us."""
    real_popen = subprocess.Popen

    def start_then_interrupt(*args: Any, **kwargs: Any) -> subprocess.Popen:
        started.append(real_popen(*args, **kwargs))
        os.kill(os.getpid(), signal.SIGINT)
        return started[-1]

    return start_then_interrupt
