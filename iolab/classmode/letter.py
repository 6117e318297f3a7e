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
from iolab.classmode.reservation import request, reservation
from iolab.core.budget import LIMITS
from iolab.core.class_folder import CLASS_SUBSET_FILES, CLASS_SWEEP_SAMPLES

STATE_MARK = {"ok": "ok", "warn": "to know", "fail": "to fix"}


def _limits() -> str:
    """The login-node limits as a phrase: '1024 MiB, 20000 files, ...'."""
    return ", ".join(f"{limit.most} {limit.unit}" for limit in LIMITS.values()) + " at most"


def _gb(nbytes: float) -> str:
    """Bytes as GB, or as MB below one GB (a tenth of a GB would read as nothing)."""
    return f"{nbytes / 1e9:,.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:,.0f} MB"


def letter(report: dict, load: Load, user: str, host: str, date: str, track: str = "course") -> str:
    """Markdown, one page: the request first (the reservation sized for `track`, see
    iolab.classmode.reservation), the evidence after."""
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

{request(reservation(n, track), track, reserved)}
2. **ptrace of one's own processes** (strace), for the system-call counts of the first
   lessons, and **FUSE for ordinary users** (sshfs), for the network-file-system comparisons.
   Without them the lessons show a recorded run instead; nothing fails.
3. **Room for the class** where the workspaces go: {room}.

## The load we expect

The class runs in class mode: the instructor installs the lab once, the day before
(`iolab class setup`: one Python environment, one copy of the lab, the datasets, all read-only
to the learners), and each learner writes only to a private workspace. Learners install
nothing. The shared install is {load.shared_files:,} files and {_gb(load.shared_bytes)} (the \
class setup recorded on {load.shared_recorded_on}, on {load.shared_machine}); the per-learner \
figures come from one recorded run of the whole lab ({load.recorded_on}, on {load.machine}) \
less the activity dataset, which the class shares, plus the \
{CLASS_SUBSET_FILES}-file subset that lessons 02 and 04 make in a class instead and the image \
samples lesson 09 copies (their sizes measured by building them). Files and bytes are the \
same on any machine.

| | once for the class | one learner | {n} learners |
| --- | ---: | ---: | ---: |
| the shared install (read-only) | {load.shared_files:,} files, {_gb(load.shared_bytes)} | | |
| a workspace after the whole lab (an upper bound: it includes the image dataset, which a \
class shares) | | {load.kept_files:,} files, {_gb(load.kept_bytes)} | \
{n * load.kept_files:,} files, {_gb(n * load.kept_bytes)} |
| a workspace at its largest, during one lesson (lessons 02 and 04 each make a private \
{CLASS_SUBSET_FILES}-file subset of the dataset for their cold-cache tests, lesson 09 a copy \
of {CLASS_SWEEP_SAMPLES} image samples; removed when the lesson ends) | | \
{load.class_files_each:,} files, {_gb(load.class_bytes_each)} | \
{load.class_files_all:,} files, {_gb(load.class_bytes_all)} |
| /dev/shm (memory) at its fullest: lesson 02's subset, removed after | | \
{load.shm_files:,} files, {_gb(load.shm_bytes)} | {n * load.shm_files:,} files, \
{_gb(n * load.shm_bytes)} |
| processes (threads) one learner's lab holds at once, at most: measured in a rehearsal of \
{load.rehearsed_learners} learners running lessons {load.rehearsed_lessons} \
({load.rehearsed_on}, on {load.rehearsal_machine}); their login shell comes on top | | \
{load.processes_each} ({load.threads_each}) | {n * load.processes_each:,} \
({n * load.threads_each:,}) |
| files created, statted and removed on scratch by the metadata-storm job ({JOB_NODES} \
nodes x {STORM_TASKS_PER_NODE} tasks x {STORM_FILES_PER_TASK:,} files, all at once) | | \
{load.storm_files_each:,} | {load.storm_files_all:,} |

Without class mode, each learner alone with their own checkout, environment and datasets
would take {load.files_each:,} files and {_gb(load.bytes_each)} at the peak: \
{load.files_all:,} files and {_gb(load.bytes_all)} for {n}.

Every benchmark step keeps to the lab's login-node budget ({_limits()}), takes turns with the
other learners' through the class's queue, and cleans up after itself. The batch jobs clean
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
