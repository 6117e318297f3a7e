"""One clear sentence instead of a traceback.

Every problem a learner can fix (bad input, a missing tool, a full disk) is raised as a
LabError whose message says what is wrong and how to fix it; the command-line entry points
print that sentence and exit, so nobody is left reading a stack trace on a login node.

Ctrl-C and SIGTERM (`kill`, a batch system's time limit) unwind the same way: cleanup code
runs, and the command prints one sentence. Only a command that knows what it left behind
says so (it raises Interrupted with that outcome); otherwise the sentence claims nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn

#: The exit status of an interrupted command, whether by Ctrl-C or SIGTERM (128 + SIGINT).
INTERRUPTED_EXIT = 130
#: The exit status when the reader of our output went away (`| head`): 128 + SIGPIPE, what the
#: shell reports for `cat` stopped the same way.
PIPE_CLOSED_EXIT = 141


class LabError(Exception):
    """A problem the user can fix; the message is one sentence with the fix."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, carrying what the interrupted command left behind.

    A subclass of KeyboardInterrupt so that every `except KeyboardInterrupt` cleanup runs
    for it too; `outcome` is a true statement about the files, or empty if none is known.
    """

    def __init__(self, outcome: str = "") -> None:
        super().__init__(outcome)
        self.outcome = outcome


def interrupt_message(err: KeyboardInterrupt) -> str:
    """The one sentence printed for an interrupt: what was left behind, if the command knows."""
    outcome = getattr(err, "outcome", "")
    return f"interrupted: {outcome}." if outcome else "interrupted."


#: The signals whose interrupts the lab's handlers raised in this process (_raise_interrupt).
#: Numbers, not the exceptions: an exception kept here would keep its traceback's frames
#: alive, and with them semaphores the multiprocessing resource tracker reports as leaked.
_signalled: list[int] = []


def _raise_interrupt(signum: int, frame: object) -> None:
    """The lab's handler of SIGTERM (and of SIGINT while starting): unwind like Ctrl-C, and
    remember that it happened (interrupt_behind)."""
    _signalled.append(signum)
    raise Interrupted()


def interrupt_behind(err: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM that caused `err`, if one did.

    An interrupt that lands inside a class body being created during an import (Python
    3.11 wraps it: "RuntimeError: Error calling __set_name__") or inside an except block
    arrives as another exception whose cause or context is the interrupt. One that lands in
    an extension module's initialisation can come out with no trace of it at all (seen in
    CI: SIGTERM while pandas loads gives "ImportError: PyCapsule_Import could not import
    module"), so an interrupt the lab's handlers raised counts as the cause too.
    """
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return Interrupted() if _signalled else None


#: Permission bits no file or folder a lab command creates gives to group or others.
PRIVATE_UMASK = 0o077


def run_cli(main: Callable[[], int | None], fast_exit: bool = False) -> NoReturn:
    """Run a command-line main(), turning LabError, Ctrl-C and SIGTERM into a clean exit;
    with `fast_exit`, a finished command skips the interpreter's teardown (see leave).

    Everything a lab command writes is private to the user (files 0600, folders 0700),
    whatever the user's umask: on a login node /tmp, /dev/shm and scratch are shared, and an
    instructor's `umask 022` must not publish a learner's results. Sharing is done on purpose,
    with chmod, where it is the point.
    """
    os.umask(os.umask(PRIVATE_UMASK) | PRIVATE_UMASK)
    try:
        with sigterm_as_interrupt():
            code = main()
    except LabError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as err:
        exit_interrupted(err)
    except BrokenPipeError:  # `| head` has all it wanted: stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = PIPE_CLOSED_EXIT
    except ModuleNotFoundError as err:
        interrupt = interrupt_behind(err)
        if interrupt is not None:
            exit_interrupted(interrupt)
        sentence = missing_package(err)
        if sentence is None:
            raise
        print(f"error: {sentence}", file=sys.stderr)
        sys.exit(2)
    except Exception as err:
        interrupt = interrupt_behind(err)
        if interrupt is None:
            raise
        exit_interrupted(interrupt)
    if fast_exit:
        leave(code or 0)
    sys.exit(code or 0)


#: Optional packages with a make target of their own that installs them into .venv.
OPTIONAL_PACKAGES = {"torch": "make torch", "darshan": "make darshan"}


def missing_package(err: ModuleNotFoundError) -> str | None:
    """What to do when a third-party package is missing from the Python that runs the lab (a
    system python3 before `make lab`, say); None when the missing module is iolab's own."""
    package = (err.name or "").partition(".")[0]
    if not package or package == "iolab":
        return None
    where = (
        f"`{OPTIONAL_PACKAGES[package]}` installs it into the lab's .venv"
        if package in OPTIONAL_PACKAGES
        else "run the command with the lab's own Python, `.venv/bin/python -m iolab ...` in "
        "the lab's folder, once `make lab` has built it (in a class: `source CLASS/activate` "
        "first)"
    )
    return (
        f"this command needs the Python package {package}, which {sys.executable} cannot "
        f"import: {where}"
    )


def leave(code: int) -> NoReturn:
    """End a finished command at once: atexit handlers run and output is flushed, but the
    interpreter's teardown, which only frees memory the kernel takes back anyway, is skipped.

    With pandas loaded that teardown is about 50 ms, a sixth of diagnosing a small Darshan
    log (measured here). Only for the `iolab` command, whose modules were checked for cleanup
    left to the teardown: extension modules can hook it (mpi4py calls MPI_Finalize there, and
    an MPI rank leaving without it fails the job). A non-daemon thread still running, or
    mpi4py loaded, gets Python's usual exit instead.
    """
    if "mpi4py.MPI" in sys.modules or any(
        thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
    ):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        os._exit(PIPE_CLOSED_EXIT)
    os._exit(code)


#: Undo steps that must run even when an interrupt cuts a context manager off between its
#: own steps: a signal handled in contextlib's __enter__ after the generator took a lock, or
#: in __exit__ before the generator resumed, leaves that generator suspended with its
#: `finally` never run (seen in CI: a writer's lock left behind by SIGTERM).
_undo_at_exit: dict[int, Callable[[], object]] = {}


def undo_if_cut_off(undo: Callable[[], object]) -> int:
    """Have exit_interrupted run `undo` unless forget_undo(token) is called first."""
    token = id(undo)
    _undo_at_exit[token] = undo
    return token


def forget_undo(token: int) -> None:
    """The step registered with undo_if_cut_off has been undone in the usual way."""
    _undo_at_exit.pop(token, None)


def _close_cut_off(err: BaseException) -> None:
    """Let every context manager an interrupt cut off between its steps finish.

    The frames the interrupt unwound still hold such a manager (contextlib's __enter__ or
    __exit__ as `self`, the caller's local), and with it a suspended generator whose
    `finally` never ran (a temporary folder in a user's directory, a lock). Clearing those
    frames frees it, and Python closes a generator it frees, which runs that `finally`.
    Frames still running (the command's own entry) are left as they are.
    """
    import gc  # only on this path: every reader imports this module, and starts fast
    import traceback

    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)
        current = current.__context__
    gc.collect()


def exit_interrupted(err: KeyboardInterrupt) -> NoReturn:
    """Print the interrupt's one sentence and end at once, skipping the interpreter's shutdown.

    An interrupt that cut an extension module's import short (numpy, pandas) can make the
    shutdown abort with "Fatal Python error" (seen in CI); the cleanup that matters has
    already run while the exception unwound through the `finally` blocks, except where the
    interrupt cut a context manager off between its steps (undo_if_cut_off): that runs here.
    """
    _close_cut_off(err)
    for undo in list(_undo_at_exit.values()):
        with contextlib.suppress(Exception):
            undo()
    _undo_at_exit.clear()
    print(interrupt_message(err), file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED_EXIT)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM (`kill`, a batch system's time limit) unwinds like Ctrl-C.

    Code that must clean up (a mount, a benchmark's files) already handles KeyboardInterrupt;
    this makes the same cleanup run when a job is killed politely.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers
        return

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back until the block is done, then raise Interrupted.

    For steps that must not stop halfway: renaming a finished dataset into place, or
    unmounting and removing what a run made (an impatient second Ctrl-C must not leave a
    mount, an sshd or a half-swapped directory behind).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {
        sig: signal.signal(sig, lambda signum, frame: received.append(signum)) for sig in held
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if received:
        raise Interrupted()


def quiet_interrupts() -> None:
    """For a script that imports slow libraries first: Ctrl-C or SIGTERM while it is still
    starting ends it with the one sentence run_cli prints, not a traceback of the imports."""
    previous_hook = sys.excepthook

    def hook(kind, value, traceback) -> None:
        interrupt = interrupt_behind(value) if value is not None else None
        if interrupt is not None:
            exit_interrupted(interrupt)
        else:
            previous_hook(kind, value, traceback)

    sys.excepthook = hook
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
        signal.signal(signal.SIGINT, _raise_interrupt)
