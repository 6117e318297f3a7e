"""`iolab class load-test --learners N`: a class of N real users joining one class at once.

Needs root (it creates the users, as CI may): on a laptop or a VM, not on a cluster. It sets
up a real class (the environment built by pip), lets one learner reach a first result alone,
then all N at once, each as their own user: join, time the archive reader on the shared
dataset, put the result on the wall (the first result), then one heavy step through the
class's queue. It measures what the instructor guide quotes: the setup, each learner's time
to a first result against the lone learner's, the queue's waits and whether anyone was
overtaken, that the shared place got no file or byte more, that no learner could read or
change another's files, and that teardown left nothing.
"""

from __future__ import annotations

import json
import math
import os
import pwd
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from iolab.classmode.setup import setup_class
from iolab.classmode.teardown import clean_class
from iolab.classmode.wall import read_wall
from iolab.core.budget import LIMITS
from iolab.core.class_folder import CLASS_ENV, read_class
from iolab.core.errors import LabError
from iolab.measure.context import machine_context, machine_label
from iolab.measure.footprint import footprint

GROUP = "iolab-bench"
PREFIX = "iolab-bench-"
SLOTS = 2
HEAVY_FILES = 300
PYTHON = "/usr/bin/python3"
#: What the benchmark keeps of each learner's wall file (the time it was written is noise).
WALL_KEYS = ("user", "node", "workspace_fs", "readers", "fio", "checks")

#: One learner: the first result (the archive reader on the shared data, on the wall), then a
#: heavy step in the queue, asked for at once. Prints its timestamps as JSON.
LEARNER = f"""
import json, os, sys, time
from iolab.classmode.wall import publish
from iolab.core.class_folder import active_class, heavy_turn
from iolab.core.lab_dirs import ensure_writable_dir, results_dir
from iolab.core.workspace import default_dataset_dir, workdir
from iolab.measure.footprint import PhaseSampler
from iolab.measure.readers import time_readers, timing_frame
from iolab.storage.mdrates import run_mdtest
ensure_writable_dir(workdir())
timing_frame(time_readers(default_dataset_dir(), names=("read_archive",), repeats=1)).to_csv(
    results_dir() / "readers.csv", index=False)
publish(active_class())
first = time.time()
first_cpu = sum(os.times()[:4])  # user and system seconds, its own and its children's
with heavy_turn("bench") as ticket:
    got = time.time()
    arrived = os.stat(active_class().queue / ticket).st_ctime  # the kernel's arrival time
    with PhaseSampler({{"workspace": workdir()}}, interval_s=0.02) as sampler:
        sampler.begin("heavy")  # its first sample is the workspace after the first result
        run_mdtest(workdir(), {HEAVY_FILES}, 1, progress=False)
held = sampler.phases[0].peak["workspace"]
print(json.dumps({{"first": first, "first_cpu": first_cpu, "arrived": arrived, "got": got,
                  "done": time.time(), "held_files": held.files, "held_bytes": held.bytes}}))
"""

#: What another learner must not be able to do; prints what it could.
PROBE = """
import os, sys
first_home, root = sys.argv[1], sys.argv[2]
tries = {
    "list another's workspace": lambda: os.listdir(first_home),
    "append to the shared dataset": lambda: open(root + "/dataset/manifest.json", "a"),
    "write into the class's lab": lambda: open(root + "/lab/added.py", "w"),
    "replace another's wall file": lambda: open(root + "/wall/" + sys.argv[3] + ".json", "w"),
    "delete another's wall file": lambda: os.unlink(root + "/wall/" + sys.argv[3] + ".json"),
}
for what, attempt in tries.items():
    try:
        attempt()
    except PermissionError:
        continue
    print(what)
"""


def require_root() -> None:
    missing = [
        tool for tool in ("useradd", "userdel", "groupadd", "runuser") if shutil.which(tool) is None
    ]
    if os.geteuid() != 0 or missing:
        raise LabError(
            "`python -m iolab class load-test` creates real users, which needs root and "
            "useradd/runuser: run it in a VM or a container of your own, not on a "
            "shared cluster"
        )
    if not os.access(PYTHON, os.X_OK):
        raise LabError(f"no {PYTHON} that the benchmark's users can run; install python3")


def make_learners(names: list[str], group: str, stage: Path) -> list[str]:
    """Accounts `names` in `group`, each with a private home in `stage` (its name); returns
    what was created (accounts, and "group:NAME"), for remove_learners."""
    made = []
    if subprocess.run(["getent", "group", group], capture_output=True).returncode:
        subprocess.run(["groupadd", group], check=True)
        made.append(f"group:{group}")
    for name in names:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(
                ["useradd", "--no-create-home", "--shell", "/bin/sh", "-G", group, name], check=True
            )
            made.append(name)
        home = stage / name
        home.mkdir()
        os.chown(home, pwd.getpwnam(name).pw_uid, pwd.getpwnam(name).pw_gid)
        home.chmod(0o700)
    return made


def remove_learners(made: list[str]) -> None:
    """Delete what make_learners created, accounts before their group."""
    for name in reversed(made):
        if name.startswith("group:"):
            subprocess.run(["groupdel", name[len("group:") :]], capture_output=True)
        else:
            subprocess.run(["userdel", name], capture_output=True)


def as_learner(
    name: str, stage: Path, root: Path, *argv: str, followed: bool = False
) -> subprocess.Popen:
    """Start `argv` as learner `name` in a clean environment, joined to the class in `root`
    as `source root/activate` joins, in their home. `followed`: its output as one unbuffered
    stream to read line by line, in a session of its own so that it can be stopped whole."""
    env = {
        "HOME": str(stage / name),
        "USER": name,
        "LOGNAME": name,
        "PATH": f"{root}/env/bin:/usr/bin:/bin",
        CLASS_ENV: str(root),
        **({"PYTHONUNBUFFERED": "1"} if followed else {}),
    }
    return subprocess.Popen(
        [
            "runuser",
            "-u",
            name,
            "--",
            "env",
            "-i",
            *(f"{key}={value}" for key, value in env.items()),
            *argv,
        ],
        cwd=stage / name,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if followed else subprocess.PIPE,
        text=True,
        start_new_session=followed,
    )


def _learn(names: list[str], stage: Path, root: Path) -> list[dict]:
    """Start every learner at once; their timestamps, relative to their own start."""
    started = {}
    running = {}
    for name in names:
        started[name] = time.time()
        running[name] = as_learner(name, stage, root, "python", "-c", LEARNER)
    results = []
    for name, proc in running.items():
        out, err = proc.communicate(timeout=3600)
        if proc.returncode:
            raise LabError(f"learner {name} failed: {err.strip().splitlines()[-1]}")
        stamps = json.loads(out)
        counts = {key: stamps.pop(key) for key in ("first_cpu", "held_files", "held_bytes")}
        results.append(
            {
                "learner": name,
                **{key: stamps[key] - started[name] for key in stamps},
                **counts,
                "asked_at": stamps["arrived"],
                "got_at": stamps["got"],
            }
        )
    return results


def _overtaken(results: list[dict]) -> int:
    """Pairs where the later arrival in the queue got its turn clearly before the earlier."""
    return sum(
        1
        for a in results
        for b in results
        if a["asked_at"] < b["asked_at"] and b["got_at"] + 0.5 < a["got_at"]
    )


def cpu_floor(results: list[dict], cores: int, lone_s: float) -> dict:
    """What the cores allow, whatever the scheduling: the last of N first results cannot come
    before all their CPU seconds are spent, spread over every core; and for N at once to end
    within twice the lone learner's time, the cores must do all that work in that time."""
    total = sum(result["first_cpu"] for result in results)
    return {
        "first_cpu_total_s": round(total, 1),
        "first_cpu_median_s": round(statistics.median(r["first_cpu"] for r in results), 2),
        "first_result_floor_s": round(total / cores, 1),
        "first_result_floor_ratio": round(total / cores / lone_s, 1),
        "cores_for_twice_alone": math.ceil(total / (2 * lone_s)),
    }


def _shared(root: Path) -> tuple[int, int]:
    size = footprint([root], skip=[root / "queue", root / "wall"])
    return size.files, size.bytes


def run_class_bench(learners: int) -> dict:
    """The benchmark; see the module docstring. Everything it made is gone afterwards."""
    require_root()
    stage = Path(tempfile.mkdtemp(prefix="iolab-class-bench-", dir="/tmp"))
    stage.chmod(0o755)
    made: list[str] = []
    try:
        names = [f"{PREFIX}{number:02d}" for number in range(1, learners + 1)]
        made = make_learners(names, GROUP, stage)
        root = stage / "class"
        started = time.monotonic()
        report = setup_class(
            root, learners, slots=SLOTS, group=GROUP, python=PYTHON, say=lambda text: None
        )
        setup_s = time.monotonic() - started
        shared_before = _shared(root)
        lone = _learn(names[:1], stage, root)[0]
        together = _learn(names, stage, root)
        shared_after = _shared(root)
        wall = [
            {key: record.get(key) for key in WALL_KEYS} for record in read_wall(read_class(root))
        ]
        probe = (
            as_learner(
                names[1],
                stage,
                root,
                "python",
                "-c",
                PROBE,
                str(stage / names[0]),
                str(root),
                names[0],
            )
            if learners > 1
            else None
        )
        allowed = probe.communicate(timeout=120)[0].split("\n") if probe else []
        for name in names:
            as_learner(name, stage, root, "python", "-m", "iolab", "clean").communicate(timeout=600)
        left_in_homes = sum(len(os.listdir(stage / name)) for name in names)
        freed = clean_class(root)
        firsts = [result["first"] for result in together]
        waits = [result["got"] - result["arrived"] for result in together]
        heavy = [result["done"] - result["got"] for result in together]
        return {
            "machine": machine_label(machine_context(stage, tools=())),
            "cores": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d"),
            "learners": learners,
            "slots": SLOTS,
            "setup_s": round(setup_s, 1),
            "class_files": report.files,
            "class_bytes": report.bytes,
            "lone_first_result_s": round(lone["first"], 2),
            "first_result_median_s": round(statistics.median(firsts), 2),
            "first_result_max_s": round(max(firsts), 2),
            "first_result_ratio": round(statistics.median(firsts) / lone["first"], 1),
            "first_result_max_ratio": round(max(firsts) / lone["first"], 1),
            "lone_first_cpu_s": round(lone["first_cpu"], 2),
            **cpu_floor(together, os.cpu_count() or 1, lone["first"]),
            "queue_wait_median_s": round(statistics.median(waits), 2),
            "queue_wait_max_s": round(max(waits), 2),
            "queue_wait_bound_s": round(math.ceil(learners / SLOTS) * max(heavy), 2),
            "heavy_step_median_s": round(statistics.median(heavy), 2),
            "overtaken_pairs": _overtaken(together),
            # the most one learner held in their workspace (peak, sampled every 20 ms), and
            # the files a run may hold in this class (the node's budget over the queue's slots)
            "learner_files_max": max(result["held_files"] for result in together),
            "learner_bytes_max": max(result["held_bytes"] for result in together),
            "budget_files_per_run": LIMITS["files"].most // SLOTS,
            "shared_files_added": shared_after[0] - shared_before[0],
            "shared_bytes_added": shared_after[1] - shared_before[1],
            "allowed_across_learners": [line for line in allowed if line],
            "left_in_homes": left_in_homes,
            "class_files_freed": freed.files,
            "class_folder_removed": freed.folder_removed,
            "wall": wall,  # the learners' first results, as the class wall read them
        }
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        remove_learners(made)
