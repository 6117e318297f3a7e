"""The login-node budget: what one run of the lab may take from a shared machine.

A login node is shared by everyone on the cluster, and the lab is run there first. A run
that fills its disk or inode table, occupies its cores or keeps its disk busy for minutes
slows everybody down, and administrators rightly kill it. So every command that can be
large checks its request against LIMITS before it writes anything, and refuses with one
sentence that says how to run it anyway.

The limits are lifted inside a batch job on a compute node, whose node is then the job's
own (iolab.core.cluster.on_compute_node), or when the user passes the one flag FLAG
(`compute_node=True` in Python) on a machine that is theirs alone. Limits that keep a
request meaningful rather than the node usable (a size above zero, a file small enough to
be metadata) are not part of the budget: they stay with the code they protect.
"""

from __future__ import annotations

from dataclasses import dataclass

from iolab.core.class_folder import concurrent_runs
from iolab.core.cluster import on_compute_node
from iolab.core.errors import LabError

#: The one flag that lifts the budget, in every command that has a limit.
FLAG = "--i-am-on-a-compute-node"


#: The limits a class divides among the runs its queue lets happen at once: the bytes and
#: files they hold add up on the shared disks. Processes are not divided: a fio profile's
#: jobs are its design (no option scales numjobs), so a class keeps at most slots x 4 busy.
SHARED_AT_ONCE = ("data_mib", "files")


@dataclass(frozen=True)
class Limit:
    """The most a run may use of one resource, its unit, and why that much."""

    most: int
    unit: str
    why: str


LIMITS: dict[str, Limit] = {
    "data_mib": Limit(
        1024,
        "MiB",
        (
            "the data one run writes or holds at once (fio's files, a sweep point, a large "
            "file, a checkpoint): 1 GiB is seconds of a disk's bandwidth, yet a real share of "
            "the free space, RAM and page cache that all users of the node share"
        ),
    ),
    "files": Limit(
        20_000,
        "files",
        (
            "the files one run has at once (mdrates, a sweep point): every file costs an inode "
            "and metadata-server work, which quotas count and every user of the file system "
            "waits for"
        ),
    ),
    "processes": Limit(
        4,
        "processes",
        (
            "the processes one run keeps busy at once (fio's numjobs, mdrates -P): a login "
            "node's cores serve dozens of users' shells, editors and compilers"
        ),
    ),
    "job_s": Limit(
        20,
        "s per job",
        (
            "how long one benchmark job may keep the disk busy: a burst of seconds goes "
            "unnoticed, minutes of it stall everyone's file operations"
        ),
    ),
}


def lifted(compute_node: bool | None = None) -> bool:
    """Whether the limits are off: as the caller says (the flag), else as a batch job shows."""
    return on_compute_node() if compute_node is None else compute_node


def most(name: str) -> int:
    """The limit `name` for one run here: in a class, what adds up across runs on the shared
    disks (bytes, files) is the node's limit divided by the runs the class's queue lets
    happen at once."""
    share = concurrent_runs() if name in SHARED_AT_ONCE else 1
    return max(1, LIMITS[name].most // share)


def excess(**amounts: float) -> list[str]:
    """How `amounts` (named as the keys of LIMITS) exceed the limits, one phrase each."""
    problems = []
    for name, amount in amounts.items():
        limit, unit = most(name), LIMITS[name].unit
        if amount > limit:
            shared = (
                f", this class's share of {LIMITS[name].most} {unit}"
                if limit < LIMITS[name].most
                else ""
            )
            problems.append(f"{amount:.0f} {unit} > {limit} {unit}{shared}")
    return problems


def refusal(what: str, problems: list[str], fix: str = "") -> LabError:
    """The one sentence that refuses `what` on a login node and names the way round it."""
    instead = f"{fix}, " if fix else ""
    return LabError(
        f"{what} is too big for a shared login node ({'; '.join(problems)}); "
        f"{instead}run it in a batch job on a compute node, or pass {FLAG} "
        "(compute_node=True in Python) if the node is yours alone"
    )


def check(what: str, *, fix: str = "", compute_node: bool | None = None, **amounts: float) -> None:
    """Refuse `what` if it exceeds a limit here, unless the limits are lifted.

    `amounts` are named as the keys of LIMITS (data_mib=..., files=..., ...); `fix` says how
    to make the request smaller, e.g. "use fewer files or processes".
    """
    if lifted(compute_node):
        return
    problems = excess(**amounts)
    if problems:
        raise refusal(what, problems, fix)
