"""One clear sentence instead of a traceback.

Every problem a learner can fix (bad input, a missing tool, a full disk) is raised as a
LabError whose message says what is wrong and how to fix it; the command-line entry points
print that sentence and exit, so nobody is left reading a stack trace on a login node.
"""

from __future__ import annotations

import sys
from typing import Callable, NoReturn


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
