"""One report of a command's system calls, whichever method could count them here.

A number a method cannot know is None, never a zero: the fallback without strace cannot see
reads per file, and a table that printed 0 there would teach something false.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

#: Where a call is attributed: a dataset file, any other file, or no file at all.
TARGETS = ("dataset", "other_files", "no_path")


@dataclass
class SyscallReport:
    """Syscall counts of one command from whichever method could run here.

    method is "strace", "audit-hook+proc-io" (a Python command counted from inside) or
    "proc-io" (another command: only /proc/<pid>/io); note says why that method was used
    and what it cannot see. A number the method cannot know is None, not 0. The read_/
    write_syscalls, chars_* and storage_bytes_read fields cover the whole process (all
    files); from strace they count traced read/write calls and the byte fields are None.
    """

    method: str
    note: str
    command: list[str]
    dataset_dir: str
    exit_code: int
    stdout: str
    stderr: str
    dataset_opens: int | None = None
    dataset_dir_opens: int | None = None
    other_opens: int | None = None
    dataset_calls: int | None = None
    other_calls: int | None = None
    total_calls: int | None = None
    dataset_reads: int | None = None
    dataset_bytes_read: int | None = None
    dataset_seeks: int | None = None
    dataset_stats: int | None = None
    read_syscalls: int | None = None
    write_syscalls: int | None = None
    chars_read: int | None = None
    chars_written: int | None = None
    storage_bytes_read: int | None = None
    by_syscall: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(
            {
                "syscall": pd.Series(dtype=object),
                "target": pd.Series(dtype=object),
                "calls": pd.Series(dtype="int64"),
            }
        )
    )
    dataset_open_counts: dict[str, int] | None = None

    def to_json_dict(self) -> dict:
        """The report as plain JSON types (by_syscall as a list of rows), no captured output."""
        numbers = (
            "dataset_opens",
            "dataset_dir_opens",
            "other_opens",
            "dataset_calls",
            "other_calls",
            "total_calls",
            "dataset_reads",
            "dataset_bytes_read",
            "dataset_seeks",
            "dataset_stats",
            "read_syscalls",
            "write_syscalls",
            "chars_read",
            "chars_written",
            "storage_bytes_read",
        )
        return {
            "method": self.method,
            "note": self.note,
            "command": self.command,
            "dataset_dir": self.dataset_dir,
            **{name: _plain(getattr(self, name)) for name in numbers},
            "by_syscall": [
                {"syscall": str(r.syscall), "target": str(r.target), "calls": int(r.calls)}
                for r in self.by_syscall.itertuples(index=False)
            ],
            "exit_code": self.exit_code,
        }

    @classmethod
    def from_json_dict(cls, value: dict) -> SyscallReport:
        """A report read back from to_json_dict (a recorded run): the counts, no captured output."""
        fields = {name: item for name, item in value.items() if name != "by_syscall"}
        by_syscall = pd.DataFrame(value["by_syscall"], columns=["syscall", "target", "calls"])
        return cls(stdout="", stderr="", by_syscall=by_syscall.astype({"calls": "int64"}), **fields)


def _plain(value: int | None) -> int | None:
    return None if value is None else int(value)


def format_report(report: SyscallReport, top: int = 12) -> str:
    """A small readable table of a report: dataset numbers, everything else, busiest calls."""

    def show(value: int | None) -> str:
        return "n/a" if value is None else f"{value:,}"

    sections = {
        "on the dataset's files": [
            ("file opens", report.dataset_opens),
            ("directory opens", report.dataset_dir_opens),
            ("reads", report.dataset_reads),
            ("bytes read", report.dataset_bytes_read),
            ("seeks", report.dataset_seeks),
            ("stat calls", report.dataset_stats),
            ("all traced calls", report.dataset_calls),
        ],
        "everything else": [
            ("file opens", report.other_opens),
            ("all traced calls", report.other_calls),
        ],
        "whole process": [
            ("read calls", report.read_syscalls),
            ("write calls", report.write_syscalls),
            ("bytes read (all files)", report.chars_read),
            ("bytes read from storage", report.storage_bytes_read),
        ],
    }
    lines = [
        f"command:  {' '.join(report.command)}",
        f"data dir: {report.dataset_dir}",
        f"method:   {report.method} ({report.note})",
        f"exit code: {report.exit_code}",
    ]
    for title, rows in sections.items():
        lines += ["", title] + [f"  {label:<26}{show(value):>12}" for label, value in rows]
    if not report.by_syscall.empty:
        table = report.by_syscall.pivot_table(
            index="syscall", columns="target", values="calls", aggfunc="sum", fill_value=0
        )
        table = table.reindex(columns=list(TARGETS), fill_value=0)
        table = table.loc[table.sum(axis=1).sort_values(ascending=False).index[:top]]
        lines += ["", f"busiest traced system calls (top {top}, calls)", table.to_string()]
    return "\n".join(lines)
