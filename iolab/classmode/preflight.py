"""`iolab class preflight`: what an instructor learns about a cluster a week before a workshop.

Each check looks at one thing a class needs and says, in one sentence, what it found and what
to do: whether strace may trace (ptrace), whether FUSE mounts work (sshfs), whether Slurm
takes a job and which reservations are visible, how much room home and scratch have for N
learners, which supported Pythons are on PATH, and whether the class folder is safe to
share. Nothing is written except the two reports, and nothing is submitted: `sbatch
--test-only` validates a job without queuing it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from iolab.classmode.load import Load
from iolab.core.rename_risk import RENAME_FIX, rename_risk
from iolab.core.storage_areas import STORAGE_AREAS
from iolab.measure.context import mount_for
from iolab.measure.tools import fuse_problem, ptrace_problem
from iolab.storage.locations import Location, discover_locations, quota_text

#: Seconds a Slurm client command may take before the check gives up on it.
SLURM_TIMEOUT_S = 30
#: The Pythons the lab supports (the Makefile's CHECK_PYTHON).
SUPPORTED = ((3, 10), (3, 11), (3, 12), (3, 13))
#: Places a class's files may live, in the order the preflight prefers for workspaces.
WORKSPACE_PREFERENCE = tuple(
    name
    for _, name in sorted(
        (area.workspace_rank, area.name)
        for area in STORAGE_AREAS
        if area.workspace_rank is not None
    )
)
#: What a learner sees when a tool is missing: the lessons that show the recorded run
#: instead (as `make lab` listed them without these tools; workshop/lab-budget-recorded.json).
FALLBACKS = {
    "strace": "the recorded system-call counts in lessons 01, 02, 03, 06, 08, 09 and 12",
    "sshfs": "the recorded network-file-system runs in lessons 02, 04, 06, 09 and 10",
    "sbatch": "the job scripts of demos/slurm (lessons 08 and 11) as text to read, not jobs "
    "to submit",
}
#: The check that says whether each tool of FALLBACKS works here.
FALLBACK_CHECKS = {"strace": "ptrace", "sshfs": "fuse", "sbatch": "slurm"}


@dataclass(frozen=True)
class Check:
    """One finding of the preflight: ok, warn (the class works, with a fallback) or fail
    (something to fix before the day), with what to do."""

    name: str
    state: str
    found: str
    todo: str = ""


def check_ptrace() -> Check:
    strace = shutil.which("strace")
    if strace is None:
        return Check(
            "ptrace",
            "warn",
            "strace is not installed on this node",
            f"ask for the strace package or module; without it learners see {FALLBACKS['strace']}",
        )
    problem = ptrace_problem(strace)
    if problem:
        return Check(
            "ptrace",
            "warn",
            f"strace is installed but {problem}",
            "ask the admins to allow ptrace of one's own processes (Yama "
            f"kernel.yama.ptrace_scope 0 or 1); otherwise learners see "
            f"{FALLBACKS['strace']}",
        )
    return Check("ptrace", "ok", f"strace ({strace}) may trace a learner's own programs")


def check_fuse() -> Check:
    sshfs = shutil.which("sshfs")
    problem = "sshfs is not installed on this node" if sshfs is None else fuse_problem()
    if problem:
        return Check(
            "fuse",
            "warn",
            problem,
            "ask for sshfs and FUSE access for ordinary users (a readable and writable "
            f"/dev/fuse), or teach with the cluster's own network file systems; "
            f"otherwise learners see {FALLBACKS['sshfs']}",
        )
    return Check("fuse", "ok", f"sshfs ({sshfs}) can mount FUSE file systems here")


def _slurm(argv: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SLURM_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def reservations() -> list[dict[str, str]]:
    """The reservations Slurm shows this user (name, start, end, nodes, users, accounts)."""
    if shutil.which("scontrol") is None:
        return []
    proc = _slurm(["scontrol", "show", "reservation", "--oneliner"])
    if proc is None or proc.returncode != 0:
        return []
    found = []
    for line in proc.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "ReservationName" in fields:
            found.append(
                {
                    key: fields.get(key, "")
                    for key in (
                        "ReservationName",
                        "StartTime",
                        "EndTime",
                        "Nodes",
                        "Users",
                        "Accounts",
                    )
                }
            )
    return found


#: What to do about sbatch's refusal, by the words of Slurm's own error messages
#: (src/common/slurm_errno.c); the first that matches wins.
SLURM_FIXES = (
    (
        "Invalid account",
        "set SBATCH_ACCOUNT to a project the learners belong to (`sacctmgr show assoc "
        "user=$USER format=account,partition` lists yours) and check again",
    ),
    (
        "Invalid partition",
        "set SBATCH_PARTITION to a partition of `sinfo -s` that learners may use, and check again",
    ),
    (
        "Invalid qos",
        "set SBATCH_QOS to a QOS of your association (`sacctmgr show assoc user=$USER "
        "format=qos`), or unset it, and check again",
    ),
    (
        "accounting/QOS policy",
        "the job is within a policy's limits only with another QOS, account or "
        "partition: ask the admins which the class should use",
    ),
    (
        "time limit",
        "the partition refuses a 5-minute job: set SBATCH_PARTITION to one for short jobs",
    ),
    (
        "node configuration is not available",
        "no node of the partition fits one task: set SBATCH_PARTITION to another",
    ),
    (
        "Unable to contact slurm controller",
        "the Slurm controller did not answer: check again later, and tell the admins if it "
        "stays so",
    ),
    (
        "Access/permission denied",
        "you may not submit there: ask the admins for access for you and the learners",
    ),
)


def slurm_fix(said: str | None) -> str:
    """The one thing to do about sbatch's last line `said` (None: no answer in time)."""
    if said is None:
        return (
            f"sbatch gave no answer within {SLURM_TIMEOUT_S} s: the controller is busy or "
            "down; check again later, and tell the admins if it stays so"
        )
    for words, fix in SLURM_FIXES:
        if words.lower() in said.lower():
            return fix
    return (
        "read Slurm's message above; if it names the account or the partition, set "
        "SBATCH_ACCOUNT or SBATCH_PARTITION to what learners will use, else ask the admins"
    )


def check_slurm() -> tuple[Check, Check]:
    """Whether sbatch accepts a job (validated with --test-only, never queued), and whether
    a reservation for the session is visible."""
    if shutil.which("sbatch") is None:
        none = Check(
            "slurm",
            "warn",
            "no sbatch here: this is not a Slurm cluster, or its client is not on PATH",
            "heavy steps then run on the login node within "
            f"the lab's budget, and learners see {FALLBACKS['sbatch']}",
        )
        return none, Check("reservation", "warn", "no Slurm, so no reservation")
    proc = _slurm(
        [
            "sbatch",
            "--test-only",
            "--job-name=iolab-preflight",
            "--ntasks=1",
            "--time=00:05:00",
            "--wrap=true",
        ]
    )
    said = (proc.stderr or proc.stdout).strip().splitlines()[-1:] if proc else []
    if proc is None or proc.returncode != 0:
        submit = Check(
            "slurm",
            "fail",
            f"sbatch --test-only refused a 5-minute one-task job "
            f"({said[0] if said else f'no answer within {SLURM_TIMEOUT_S} s'})",
            slurm_fix(said[0] if said else None),
        )
    else:
        submit = Check(
            "slurm", "ok", f"sbatch accepts a one-task job ({said[0] if said else 'ok'})"
        )
    visible = reservations()
    wanted = os.environ.get("SBATCH_RESERVATION")
    names = [r["ReservationName"] for r in visible]
    if wanted and wanted not in names:
        reserved = Check(
            "reservation",
            "fail",
            f"SBATCH_RESERVATION is {wanted}, but Slurm shows "
            f"{', '.join(names) or 'no reservation'} to you",
            "ask the admins for it (only root or the Slurm user can create one), "
            "or unset SBATCH_RESERVATION",
        )
    elif names:
        reserved = Check(
            "reservation",
            "ok",
            f"visible: {', '.join(names)}",
            "" if wanted else "export SBATCH_RESERVATION=<name> for the session",
        )
    else:
        reserved = Check(
            "reservation",
            "warn",
            "no reservation is visible to you",
            "ask the admins for one for the session's hours (only root or the "
            "Slurm user can create one); the letter says what to ask for",
        )
    return submit, reserved


def check_places(load: Load, places: list[Location]) -> tuple[list[Check], Location | None]:
    """Room for the class's private workspaces at their largest in class mode (Load) in each
    shared place (free space and inodes, and the quota as `lfs quota` or `quota` states it),
    and the place the workspaces should go."""
    judged = []
    for place in sorted(
        (p for p in places if p.name in WORKSPACE_PREFERENCE),
        key=lambda p: WORKSPACE_PREFERENCE.index(p.name),
    ):
        short = (
            [f"{load.class_bytes_all / 1e9:,.1f} GB needed, {place.free_bytes / 1e9:,.1f} GB free"]
            if place.free_bytes < load.class_bytes_all
            else []
        )
        if place.free_inodes is not None and place.free_inodes < load.class_files_all:
            short.append(f"{load.class_files_all:,} inodes needed, {place.free_inodes:,} free")
        inodes = "unknown" if place.free_inodes is None else f"{place.free_inodes:,}"
        quota = quota_text(place.fs_type, mount_for(place.base).mount_point)
        if quota == "n/a":
            quota = "unknown (neither `lfs quota` nor `quota` answered)"
        found = (
            f"{place.base} ({place.fs_type}): {place.free_bytes / 1e9:,.1f} GB and "
            f"{inodes} inodes free; your quota: {quota}"
        )
        if short:
            judged.append(
                (
                    place,
                    Check(
                        f"room in {place.name}",
                        "fail",
                        f"{found}; {'; '.join(short)} for {load.learners} learners",
                        "choose another place, or fewer learners per place",
                    ),
                )
            )
        else:
            judged.append((place, Check(f"room in {place.name}", "ok", found)))
    chosen = next((place for place, check in judged if check.state == "ok"), None)
    return [check for _, check in judged], chosen


def _version(python: str) -> tuple[int, int] | None:
    proc = subprocess.run(
        [python, "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    parts = proc.stdout.split()
    return (int(parts[0]), int(parts[1])) if proc.returncode == 0 and len(parts) == 2 else None


def check_python() -> Check:
    """Which supported CPythons learners find on PATH (python3, python3.10 ... python3.13)."""
    found: dict[tuple[int, int], str] = {}
    for name in ["python3", *(f"python{major}.{minor}" for major, minor in SUPPORTED)]:
        path = shutil.which(name)
        version = _version(path) if path else None
        if path is not None and version is not None and version in SUPPORTED:
            found.setdefault(version, path)
    if not found:
        return Check(
            "python",
            "fail",
            "no CPython 3.10 to 3.13 on PATH",
            "find the module that provides one (`module spider python`) and tell "
            "learners to load it before `make lab`",
        )
    listed = ", ".join(
        f"{major}.{minor} ({path})" for (major, minor), path in sorted(found.items())
    )
    python3 = shutil.which("python3")
    default = _version(python3) if python3 else None
    if default not in SUPPORTED:
        return Check(
            "python",
            "warn",
            f"python3 is not supported here, but these are: {listed}",
            "learners must name one: `PYTHON=python3.11 make lab`, or load a module",
        )
    return Check("python", "ok", f"supported on PATH: {listed}")


def check_class_dir(path: Path | None) -> Check:
    """The class folder: the instructor's own, shared with the group, writable by nobody else,
    in folders that let nobody else rename it."""
    if path is None:
        return Check(
            "class folder",
            "warn",
            "none given (--class-dir)",
            "choose one on scratch or project space that learners can reach",
        )
    risk = rename_risk(path)
    if risk is not None:
        return Check("class folder", "fail", risk, RENAME_FIX)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return Check(
            "class folder",
            "warn",
            f"{path} does not exist yet",
            f"create it: `mkdir -m 2750 {path}` and `chgrp <class group> {path}`",
        )
    if not stat.S_ISDIR(info.st_mode):
        return Check(
            "class folder",
            "fail",
            f"{path} is not a folder (a file or a link)",
            "name a real folder",
        )
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.getuid():
        return Check(
            "class folder",
            "fail",
            f"{path} belongs to uid {info.st_uid}, not to you",
            "use a folder you own, so no one else can change what learners run",
        )
    if mode & (stat.S_IWOTH | stat.S_IWGRP):
        return Check(
            "class folder",
            "fail",
            f"{path} is writable by others (mode {mode:04o})",
            f"`chmod go-w {path}`: learners must not change what others run",
        )
    if not mode & stat.S_IXGRP or not mode & stat.S_IRGRP:
        return Check(
            "class folder",
            "warn",
            f"{path} is not readable by its group (mode {mode:04o})",
            f"`chmod g+rx {path}` and `chgrp <class group> {path}`",
        )
    return Check("class folder", "ok", f"{path}: yours, group-readable, mode {mode:04o}")


def preflight(load: Load, class_dir: Path | None = None) -> dict:
    """Every check, the places, the fallbacks learners will see, and the class's load."""
    places = discover_locations(probe=False)
    slurm, reservation = check_slurm()
    room, chosen = check_places(load, places)
    checks = [
        check_ptrace(),
        check_fuse(),
        slurm,
        reservation,
        *room,
        check_python(),
        check_class_dir(class_dir),
    ]
    states = {check.name: check.state for check in checks}
    fallbacks = [
        f"without {tool}: {FALLBACKS[tool]}"
        for tool, name in FALLBACK_CHECKS.items()
        if states[name] != "ok"
    ]
    return {
        "learners": load.learners,
        "python": sys.version.split()[0],
        "checks": [asdict(check) for check in checks],
        "reservations": reservations(),
        "places": [
            {
                "name": p.name,
                "path": str(p.base),
                "fs_type": p.fs_type,
                "kind": p.kind,
                "networked": p.networked,
                "free_GB": round(p.free_bytes / 1e9, 1),
                "free_inodes": p.free_inodes,
            }
            for p in places
        ],
        "workspaces_in": None
        if chosen is None
        else {"name": chosen.name, "path": str(chosen.base)},
        "fallbacks": fallbacks,
        "load": {
            **asdict(load),
            "files_each": load.files_each,
            "bytes_each": load.bytes_each,
            "files_all": load.files_all,
            "bytes_all": load.bytes_all,
            "processes_all": load.processes_all,
        },
    }
