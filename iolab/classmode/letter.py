"""The one-page letter an instructor sends the centre's admins a week before a workshop:
the expected load, what needs ptrace or FUSE, the reservation to ask for, and what the
preflight found on the login node. Written from `preflight()`'s report, nothing else."""

from __future__ import annotations

from iolab.classmode.load import (
    JOB_NODES,
    STORM_FILES_PER_TASK,
    STORM_MAX_TOTAL,
    STORM_TASKS_PER_NODE,
    Load,
)
from iolab.core.budget import LIMITS

STATE_MARK = {"ok": "ok", "warn": "to know", "fail": "to fix"}


def _limits() -> str:
    """The login-node limits as a phrase: '1024 MiB, 20000 files, ...'."""
    return ", ".join(f"{limit.most} {limit.unit}" for limit in LIMITS.values()) + " at most"


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:,.1f} GB"


def letter(report: dict, load: Load, user: str, host: str, date: str) -> str:
    """Markdown, one page: the request first, the evidence after."""
    n = load.learners
    where = report["workspaces_in"]
    rows = "\n".join(
        f"| {c['name']} | {STATE_MARK[c['state']]} | {c['found']} | {c['todo']} |"
        for c in report["checks"]
    )
    reserved = ", ".join(r["ReservationName"] for r in report["reservations"]) or "none"
    room = (
        f"{where['path']} ({where['name']})"
        if where
        else "no place here has room for the whole class (see below)"
    )
    fallbacks = (
        "\n".join(f"- {line}" for line in report["fallbacks"]) or "- none: every part runs live"
    )
    # A backslash at the end of a line below joins it to the next: one line of the letter.
    return f"""# A storage I/O workshop for {n} learners on {host}

From: {user}, the instructor. Checked on {host} on {date} with `python -m iolab class preflight`.

## What we ask

1. **A reservation** for the session's hours, for {n} learners running one small batch job each
   at a time: one node each for most, {JOB_NODES} nodes each for the parallel-I/O lesson's
   jobs across nodes (a few minutes each; they can take turns). Only root or the Slurm user
   can create one, for example:
   `scontrol create reservation ReservationName=iolab StartTime=<start> Duration=<hours>:00:00 \
Users=<learners> NodeCnt={JOB_NODES}`.
   Reservations visible to us now: {reserved}.
2. **ptrace of one's own processes** (strace), for the system-call counts of the first
   lessons, and **FUSE for ordinary users** (sshfs), for the network-file-system comparisons.
   Without them the lessons show a recorded run instead; nothing fails.
3. **Room for the class** where the workspaces go: {room}.

## The load we expect

Each learner runs the lab alone from their own checkout (a Python environment, a generated
dataset of small files, results). Figures from one recorded run of the whole lab
({load.recorded_on}, on {load.machine}); files and bytes are the same on any machine.

| | one learner | {n} learners |
| --- | ---: | ---: |
| files and folders (inodes) at the peak | {load.files_each:,} | {load.files_all:,} |
| bytes at the peak | {_gb(load.bytes_each)} | {_gb(load.bytes_all)} |
| of which the Python environment | {load.environment_files:,} files, \
{_gb(load.environment_bytes)} | {n * load.environment_files:,} files |
| small files written when the dataset is generated | {load.dataset_files:,} | \
{n * load.dataset_files:,} |
| processes busy at once, at most (the lab's login-node limit) | {load.processes} | \
{load.processes_all:,} |
| files created, statted and removed on scratch by the metadata-storm job ({JOB_NODES} nodes \
x {STORM_TASKS_PER_NODE} tasks x {STORM_FILES_PER_TASK:,} files, all at once) | \
{load.storm_files_each:,} | {load.storm_files_all:,} |

Every benchmark step keeps to the lab's login-node budget ({_limits()}) and cleans up after
itself; learners install before the day, not all at the same minute. The batch jobs clean
their node-local and scratch directories when they end; the metadata-storm job refuses more
than {STORM_MAX_TOTAL:,} files in one job, and we will have the class submit it a few
learners at a time, or run it once in front of the room, as you prefer.

## What the preflight found

| check | | found | to do |
| --- | --- | --- | --- |
{rows}

What learners will see instead where something is missing:

{fallbacks}
"""
