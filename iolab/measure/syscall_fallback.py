"""Counting a command's system calls without strace: an audit hook and /proc/<pid>/io.

Where the kernel forbids ptrace (containers, some clusters), a Python program is run under
iolab/measure/audit_open.py, whose audit hook counts the files it opens, and any program's
read and write calls come from the kernel's /proc/<pid>/io counters. Coarser than a trace,
and every number it cannot know stays None.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from iolab.core.dataset import BOOKKEEPING_NAMES
from iolab.core.errors import LabError
from iolab.measure.strace_run import Finished, check_command, dataset_roots, run_scratch
from iolab.measure.syscall_report import SyscallReport

FALLBACK_PYTHON = "audit-hook+proc-io"
FALLBACK_OTHER = "proc-io"
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")


def _is_python(exe: str) -> bool:
    return bool(_PYTHON_NAME.fullmatch(os.path.basename(exe)))


def _wrap_python(cmd: list[str], dataset_dir: str, counts_file: Path) -> list[str]:
    """Run the program under iolab/measure/audit_open.py, keeping the interpreter and its options.

    The wrapper is started by file path and uses only the standard library, so it works in
    whatever directory and environment the program runs in.
    """
    options: list[str] = []
    rest = cmd[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-c", "-m", "-", "--"):
        takes_value = rest[0] in ("-X", "-W")
        options += rest[: 2 if takes_value else 1]
        rest = rest[2 if takes_value else 1 :]
    rest = rest[1:] if rest[:1] == ["--"] else rest
    if not rest or rest[0] == "-" or (rest[0] in ("-c", "-m") and len(rest) < 2):
        raise LabError(
            "without strace only Python programs given as a script, `-c CODE` or "
            "`-m MODULE` can be counted; give the program that way"
        )
    wrapper = Path(__file__).with_name("audit_open.py")
    return [
        cmd[0],
        *options,
        str(wrapper),
        "--data",
        dataset_dir,
        "--out",
        str(counts_file.resolve()),
        "--bookkeeping",
        ",".join(BOOKKEEPING_NAMES),
        "--",
        *rest,
    ]


def count_from_inside(cmd: Sequence[str], dataset_dir, cwd, env, why: str) -> SyscallReport:
    """Count without a tracer: an audit hook for a Python program's opens, /proc/<pid>/io for
    all."""
    roots = dataset_roots(dataset_dir)
    cmd = check_command(cmd, cwd, env)
    python = _is_python(cmd[0])
    with run_scratch("audit") as scratch:
        counts_file = scratch / "opens.json"
        run_cmd = _wrap_python(cmd, roots[0], counts_file) if python else cmd
        finished, io = run_counting_io(run_cmd, cwd, env, scratch)
        opens = json.loads(counts_file.read_text()) if counts_file.exists() else None
    report = SyscallReport(
        method=FALLBACK_PYTHON if python else FALLBACK_OTHER,
        note=_fallback_note(why, python, opens is not None, io is not None),
        command=cmd,
        dataset_dir=roots[0],
        exit_code=finished.exit_code,
        stdout=finished.stdout,
        stderr=finished.stderr,
    )
    if opens is not None:
        report.dataset_opens = opens["dataset_opens"]
        report.dataset_dir_opens = opens["dataset_dir_opens"]
        report.other_opens = opens["other_opens"]
        report.dataset_open_counts = opens["dataset_open_counts"]
    if io is not None:
        report.read_syscalls, report.write_syscalls = io.get("syscr"), io.get("syscw")
        report.chars_read, report.chars_written = io.get("rchar"), io.get("wchar")
        report.storage_bytes_read = io.get("read_bytes")
    return report


def _fallback_note(why: str, python: bool, have_opens: bool, have_io: bool) -> str:
    parts = [why]
    if python and have_opens:
        parts.append(
            "file and directory opens were counted by a Python audit hook (in the "
            "Python process only; files the interpreter opened while starting up are "
            "not seen)"
        )
    elif python:
        parts.append(
            "the program ended without saving its open counts (os._exit?), so opens are unknown"
        )
    else:
        parts.append("opens cannot be counted for a program that is not Python")
    parts.append(
        "read/write system calls and bytes come from /proc/<pid>/io (the whole "
        "process and the children it waited for)"
        if have_io
        else "/proc/<pid>/io could not be read here, so read/write counts are unknown"
    )
    parts.append("reads, seeks and stats per file need strace")
    return "; ".join(parts)


#: Runs the command with its output to the file $1, then closes its own stdout (telling the
#: parent the command ended and was reaped) and waits for a line on its stdin before exiting
#: with the command's status. The kernel adds a reaped child's I/O counters to its parent's,
#: and a live shell's /proc/<pid>/io is readable by its owner, while an exited (zombie)
#: process's is readable only with CAP_SYS_PTRACE, i.e. by root.
_HOLDING_SHELL = (
    'out=$1; shift; "$@" </dev/null >"$out"; status=$?; exec >&-; read -r _; exit $status'
)


def run_counting_io(cmd: list[str], cwd, env, scratch: Path) -> tuple[Finished, dict | None]:
    """Run cmd with output captured to files; its /proc/<pid>/io counts, complete, as well.

    The command runs under a shell that stays alive after reaping it (see _HOLDING_SHELL), so
    the counts include everything the command and the children it waited for did, and the
    shell itself makes no read or write call before they are read.
    """
    out_path, err_path = scratch / "stdout.txt", scratch / "stderr.txt"
    done_r, done_w = os.pipe()
    go_r, go_w = os.pipe()
    try:
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", _HOLDING_SHELL, "sh", str(out_path), *cmd],
                cwd=cwd,
                env=env,
                stdin=go_r,
                stdout=done_w,
                stderr=err,
            )
        os.close(done_w)
        os.close(go_r)
        done_w = go_r = -1
        try:
            os.read(done_r, 1)  # end of file: the command has ended and was reaped
            io = _read_proc_io(proc.pid)
            os.write(go_w, b"\n")
            exit_code = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    finally:
        for fd in (done_r, done_w, go_r, go_w):
            if fd >= 0:
                os.close(fd)
    finished = Finished(
        exit_code, out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    )
    return finished, io


def _read_proc_io(pid: int) -> dict[str, int] | None:
    """The kernel's I/O counters of a process (syscr, syscw, rchar, wchar, read_bytes, ...)."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return None
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): int(value) for key, value in pairs}
