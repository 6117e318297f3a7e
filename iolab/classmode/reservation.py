"""The reservation a workshop asks for, sized from the class and the track it teaches.

Only lesson 08 submits batch jobs; a track without it needs no reservation at all. With it,
the instructor guide has every learner submit `mpiio.sbatch` and `small-files-local.sbatch`
together at the start of lesson 08, each on `--nodes=2`, so the class's peak is N times those
two jobs at once: their tasks (one core each), their memory per node and their time limit,
read from the scripts' own `#SBATCH` lines so that the letter follows the scripts. The
metadata storm and the per-node fio run are not in the peak: the letter has the class take
turns with them (one row of the room at a time, or once in front of the room).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from iolab.core.errors import LabError
from iolab.core.workspace import repo_root

#: The workshop's tracks (workshop/instructor-guide.md) and whether each teaches lesson 08.
TRACK_LESSONS = {
    "course": "01-12",
    "intro": "01, 02, 04, 11",
    "full-day": "01-06, 11",
    "ml": "01-04, 09-11",
    "parallel-io": "05-08",
}
TRACKS_WITH_JOBS = ("course", "parallel-io")
#: What every learner submits at once at the start of lesson 08 (instructor-guide.md), with
#: the options the guide adds on the command line.
SUBMITTED_TOGETHER = {
    "mpiio.sbatch": {"nodes": 2},
    "small-files-local.sbatch": {"nodes": 2, "ntasks-per-node": 2},
}
#: Lesson 08's minutes in the tracks that teach it, the hour the jobs run in.
LESSON_08_MINUTES = 55
_SBATCH = re.compile(r"^#SBATCH --([a-z-]+)=(\S+)", re.M)
_MEMORY = re.compile(r"^(\d+)([KMGT]?)$")


@dataclass(frozen=True)
class Job:
    """One job script's resources as submitted: nodes, tasks, memory per node, minutes."""

    script: str
    nodes: int
    tasks: int
    mem_mib_per_node: int
    minutes: int


def _mib(text: str) -> int:
    """Slurm's --mem (megabytes without a suffix) in MiB, rounded up."""
    found = _MEMORY.match(text)
    if not found:
        raise LabError(f"--mem={text} is not a size this letter can read")
    factor = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[found[2]]
    return math.ceil(int(found[1]) * factor)


def _minutes(text: str) -> int:
    """Slurm's --time in whole minutes, rounded up: MM, MM:SS, HH:MM:SS, or with days,
    D-HH, D-HH:MM, D-HH:MM:SS."""
    days, _, clock = text.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    else:
        hours, (minutes, seconds) = 0, (parts + [0])[:2]
    return int(days or 0) * 1440 + hours * 60 + minutes + math.ceil(seconds / 60)


def job(script: str, options: dict[str, int]) -> Job:
    """A script of demos/slurm/ as submitted with `options` over its #SBATCH lines."""
    path = repo_root() / "demos" / "slurm" / script
    lines = dict(_SBATCH.findall(path.read_text()))
    missing = [name for name in ("mem", "time") if name not in lines]
    if missing:
        raise LabError(
            f"{path} has no `#SBATCH --{missing[0]}=` line, so the letter cannot size the "
            "reservation; put the line back (git checkout the script) or add one"
        )
    nodes = options.get("nodes", int(lines.get("nodes", 1)))
    per_node = options.get("ntasks-per-node", int(lines.get("ntasks-per-node", 0)))
    tasks = per_node * nodes if per_node else int(lines.get("ntasks", nodes))
    return Job(script, nodes, tasks, _mib(lines["mem"]), _minutes(lines["time"]))


@dataclass(frozen=True)
class Reservation:
    """What the letter asks for: None for a track that submits no job."""

    learners: int
    jobs: tuple[Job, ...]

    @property
    def cores(self) -> int:
        return self.learners * sum(each.tasks for each in self.jobs)

    @property
    def mem_gib(self) -> float:
        """Memory at the peak: every job's per-node memory on each of its nodes."""
        return self.learners * sum(j.mem_mib_per_node * j.nodes for j in self.jobs) / 1024

    @property
    def nodes(self) -> int:
        """The fewest nodes the jobs ask to be spread over (a floor, not a size)."""
        return max(each.nodes for each in self.jobs)

    @property
    def minutes(self) -> int:
        """Lesson 08, plus the longest time limit for jobs submitted at its end."""
        return LESSON_08_MINUTES + max(each.minutes for each in self.jobs)


def reservation(learners: int, track: str) -> Reservation | None:
    """The reservation for `learners` on `track`, or None when the track submits no job."""
    if track not in TRACK_LESSONS:
        raise LabError(f"--track {track} is not a track; choose one of {', '.join(TRACK_LESSONS)}")
    if track not in TRACKS_WITH_JOBS:
        return None
    jobs = tuple(job(script, options) for script, options in SUBMITTED_TOGETHER.items())
    return Reservation(learners, jobs)


def request(reserved: Reservation | None, track: str, visible: str) -> str:
    """The letter's first request, in Markdown."""
    if reserved is None:
        return (
            f"1. **No reservation.** The track we teach ({track}: lessons "
            f"{TRACK_LESSONS[track]}) submits no batch job; everything runs on the login "
            f"node within the lab's budget. Reservations visible to us now: {visible}."
        )
    n = reserved.learners
    jobs = " and ".join(
        f"`{j.script}` ({j.tasks} tasks on {j.nodes} nodes, {j.mem_mib_per_node / 1024:g} GiB per "
        f"node, {j.minutes} min)"
        for j in reserved.jobs
    )
    hours, minutes = divmod(reserved.minutes, 60)
    lessons = TRACK_LESSONS[track]
    return f"""1. **A reservation** for lesson 08 ({track}: lessons {lessons}): each of the {n} \
learners submits {jobs} at once at its start, so at the peak the class runs \
{len(reserved.jobs) * n} jobs: **{reserved.cores:,} cores and {reserved.mem_gib:,.0f} GiB of \
memory**, spread over at least {reserved.nodes} nodes (the lesson shows one aggregator per \
node), for {hours}:{minutes:02d} (the lesson's {LESSON_08_MINUTES} minutes and the jobs' time \
limit). Only root or the Slurm user can create one, for example:
   `scontrol create reservation ReservationName=iolab StartTime=<start> \
Duration={hours:02d}:{minutes:02d}:00 Users=<learners> CoreCnt={reserved.cores}` (or the \
nodes that hold that many cores: `NodeCnt=`, at least {reserved.nodes}). The metadata storm \
and the per-node fio run are not in this peak: the class takes turns with them (below).
   Reservations visible to us now: {visible}."""
