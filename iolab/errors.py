"""One clear sentence instead of a traceback.

Every problem a learner can fix (bad input, a missing tool, a full disk) is raised as a
LabError whose message says what is wrong and how to fix it; the command-line entry points
print that sentence and exit, so nobody is left reading a stack trace on a login node.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Callable, Iterator, NoReturn


class LabError(Exception):
    """A problem the user can fix; the message is one sentence with the fix."""


def run_cli(main: Callable[[], int | None]) -> NoReturn:
    """Run a command-line main(), turning LabError and Ctrl-C into a clean exit."""
    try:
        code = main()
    except LabError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted: nothing half-written is kept.", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM (`kill`, a batch system's time limit) unwinds like Ctrl-C.

    Code that must clean up (a mount, a benchmark's files) already handles KeyboardInterrupt;
    this makes the same cleanup run when a job is killed politely.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
