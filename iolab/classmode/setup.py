"""`iolab class setup DIR`: one shared, read-only install of the lab for a whole class.

A class of 30 that each build `.venv` and the dataset writes 30 times what one learner does,
at the same moment, on a shared file system. The setup writes it once, the day before: a
copy of this checkout (`lab/`), the environment built from it (`env/`, iolab installed
editable from `lab/`), the dataset with its archive and shards (`dataset/`), the image-like
samples (`images/`), each verified by its generator; a Jupyter kernel spec and an `activate`
script that join a learner to the class; and two folders learners write into, each only
their own files: `queue/` (turns for heavy steps) and `wall/` (results). Everything else is
readable by the class's group and writable by nobody but the instructor.

The folder holds a class marker from the start, so `iolab class clean` can prove it is the
instructor's class; `class.json`, which makes it a class to the learners' lab, is written
last, after the permissions: a setup cut short is never joined, and the next setup redoes it.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from iolab.classmode.layout import (CLASS_MARKER, CLASS_MARKER_TEXT, DEFAULT_SLOTS,
                                    FOLDER_MADE, LEARNER_WRITABLE, MAX_SLOTS)
from iolab.classmode.load import class_load
from iolab.classmode.preflight import check_places
from iolab.classmode.teardown import remove_made
from iolab.core.class_folder import CLASS_ENV, CLASS_FILE, CLASS_SCHEMA
from iolab.core.errors import LabError
from iolab.core.owned import fd_has_marker, open_dir, write_marker_at
from iolab.core.workspace import public_text, replace_json, repo_root, user_name
from iolab.measure.footprint import footprint
from iolab.storage.locations import discover_locations

SHARED_DIR_MODE = 0o2750
LEARNER_DIR_MODE = 0o3770
#: Not copied from a checkout that is not a git clone: builds, caches and the workspace.
NOT_COPIED = {".git", ".venv", ".venv-drishti", "workspace", "_build", "jupyter_execute",
              "__pycache__", ".pytest_cache", "iolab.egg-info"}
KERNEL_NAME = "iolab-class"


@dataclass(frozen=True)
class SetupReport:
    """What the setup made: the class, its size on disk, and the seconds of each step."""

    root: Path
    description: dict
    files: int
    bytes: int
    seconds: dict[str, float]


def _run(argv: list[str], what: str, env: dict | None = None) -> None:
    """Run one build command; its failure is one sentence with the command's last line."""
    done = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env)
    if done.returncode:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise LabError(f"{what} failed ({public_text(last)}); fix that and run "
                       "`python -m iolab class setup` again")


def _checkout_files(source: Path) -> list[Path]:
    """The checkout's files: what git tracks in a clone, else everything but builds."""
    if (source / ".git").exists() and shutil.which("git"):
        listed = subprocess.run(["git", "-C", str(source), "ls-files", "-z"],
                                capture_output=True)
        if listed.returncode == 0:  # git refuses a checkout another user owns: walk it then
            return [Path(name) for name in listed.stdout.decode().split("\0") if name]
    return [path.relative_to(source) for path in sorted(source.rglob("*"))
            if path.is_file() and not NOT_COPIED & set(path.relative_to(source).parts)]


def copy_checkout(source: Path, dest: Path) -> int:
    """Copy the lab's files to `dest`; returns how many."""
    files = _checkout_files(source)
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, target, follow_symlinks=False)
    return len(files)


def build_environment(root: Path, python: str) -> None:
    """`env/`: the lab's requirements at the locked versions, iolab editable from `lab/`."""
    lab, env = root / "lab", root / "env"
    _run([python, "-m", "venv", str(env)], f"making a virtual environment with {python}")
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]
    _run([*pip, "-c", str(lab / "requirements-lock.txt"), "-r", str(lab / "requirements.txt")],
         "installing the lab's requirements (pip)")
    _run([*pip, "--no-deps", "-e", str(lab)], "installing iolab from the class's copy")


def build_data(root: Path) -> None:
    """The dataset, its archive and shards, and the image-like samples, each verified."""
    python, generators = str(root / "env" / "bin" / "python"), root / "lab" / "data_generators"
    env = {key: value for key, value in os.environ.items() if key != CLASS_ENV}
    dataset, images = root / "dataset", root / "images"
    for script, args in (("generate_data.py", ["--data", str(dataset), "--quiet"]),
                         ("create_archive.py", ["--data", str(dataset)]),
                         ("make_shards.py", ["--data", str(dataset)]),
                         ("make_images.py", ["--data", str(images)])):
        _run([python, str(generators / script), *args], f"{script}", env)
    for script, data in (("generate_data.py", dataset), ("make_shards.py", dataset),
                         ("make_images.py", images)):
        _run([python, str(generators / script), "--data", str(data), "--verify"],
             f"verifying with {script}", env)


def write_join_files(root: Path, name: str, reservation: str | None,
                     account: str | None) -> None:
    """The kernel spec (JupyterHub, Open OnDemand) and `activate` (a terminal)."""
    python = root / "env" / "bin" / "python"
    kernel = root / "share" / "jupyter" / "kernels" / KERNEL_NAME
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Storage I/O lab (class {name})",
        "language": "python",
        "env": {CLASS_ENV: str(root)},
    }, indent=1) + "\n")
    slurm = "".join(f'export {variable}="${{{variable}:-{value}}}"\n'
                    for variable, value in (("SBATCH_RESERVATION", reservation),
                                            ("SBATCH_ACCOUNT", account)) if value)
    (root / "activate").write_text(
        f"# Join the storage I/O lab's class {name}: `source {root}/activate`\n"
        f'export {CLASS_ENV}="{root}"\n'
        f'export PATH="{root}/env/bin:$PATH"\n'
        f'export JUPYTER_PATH="{root}/share/jupyter${{JUPYTER_PATH:+:$JUPYTER_PATH}}"\n'
        f"{slurm}"
        "python -m iolab class joined\n")


def share_with_group(root: Path, gid: int) -> None:
    """Group-readable, writable by the instructor only; queue/ and wall/ as LEARNER_DIR_MODE."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        os.chown(here, -1, gid)
        writable = here.parent == root and here.name in LEARNER_WRITABLE
        os.chmod(here, LEARNER_DIR_MODE if writable else SHARED_DIR_MODE)
        for name in files + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            os.chown(path, -1, gid, follow_symlinks=False)
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, 0o750 if mode & stat.S_IXUSR else 0o640)


def learner_blockers(python: Path) -> list[str]:
    """Folders on the way to the environment's base interpreter that learners cannot enter
    (a Python under the instructor's home): the class's `env` would not start for them."""
    real = python.resolve()
    return [str(folder) for folder in [*reversed(real.parents)]
            if not folder.stat().st_mode & (stat.S_IXOTH | stat.S_IXGRP)]


def _group(name: str | None) -> int:
    """The class's group: `name`, of which the instructor must be a member, else their own."""
    if name is None:
        return os.getgid()
    try:
        gid = grp.getgrnam(name).gr_gid
    except KeyError:
        raise LabError(f"there is no group {name!r}; give the class's Unix group "
                       "(`id -Gn` lists yours)") from None
    if gid not in (os.getgid(), *os.getgroups()) and os.getuid() != 0:
        raise LabError(f"you are not a member of the group {name!r}, so the class folder "
                       "cannot be given to it; ask the centre to add you, or pick one of "
                       "`id -Gn`")
    return gid


def _prepare(root: Path) -> None:
    """Make (or accept) the class folder and mark it, saying whether a setup made the folder
    (this one, or the one cut short before it), which `class clean` then removes too."""
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise LabError(f"{root} is not a folder; name a new or empty folder for the class")
    made = not root.exists()
    if made:
        if not root.parent.is_dir():
            raise LabError(f"{root.parent} does not exist; create it or name another place")
        root.mkdir(mode=0o700)
    fd = open_dir(root)
    try:
        if os.fstat(fd).st_uid != os.getuid():
            raise LabError(f"{root} belongs to another user; use a folder of your own")
        if fd_has_marker(fd, CLASS_MARKER):
            if (root / CLASS_FILE).exists():
                raise LabError(f"{root} already holds a class; remove it first with "
                               f"`python -m iolab class clean {root}`, then set up again")
            made = FOLDER_MADE in (root / CLASS_MARKER).read_text()
            remove_made(root)  # a setup cut short: start again from nothing
        elif os.listdir(fd):
            raise LabError(f"{root} is not empty; name a new or empty folder for the class")
        os.fchmod(fd, 0o700)  # private until the class is complete
        write_marker_at(fd, CLASS_MARKER, CLASS_MARKER_TEXT + (FOLDER_MADE if made else ""))
    finally:
        os.close(fd)


def _commit(source: Path) -> str:
    done = subprocess.run(["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True) if shutil.which("git") else None
    return done.stdout.strip() if done is not None and done.returncode == 0 else "unknown"


def setup_class(root: Path, learners: int, *, slots: int = DEFAULT_SLOTS,
                group: str | None = None, python: str = sys.executable,
                reservation: str | None = None, account: str | None = None,
                say: Callable[[str], None] = print) -> SetupReport:
    """Build the class in `root` for `learners` learners; see the module docstring."""
    if not 1 <= slots <= MAX_SLOTS:
        raise LabError(f"--slots {slots} is outside 1..{MAX_SLOTS}: the login-node budget of "
                       "one run is shared by the heavy steps that run at once")
    gid = _group(group)
    load = class_load(learners)
    _, chosen = check_places(load, discover_locations(probe=False))
    place = chosen.name if chosen is not None else "home"
    root = root.expanduser().absolute()
    _prepare(root)
    seconds: dict[str, float] = {}
    source = repo_root()
    steps = (("copy of the lab", lambda: copy_checkout(source, root / "lab")),
             ("environment", lambda: build_environment(root, python)),
             ("datasets", lambda: build_data(root)),
             ("join files", lambda: write_join_files(root, root.name, reservation, account)))
    for number, (what, action) in enumerate(steps, 1):
        say(f"[{number}/{len(steps) + 1}] {what} ...")
        started = time.monotonic()
        action()
        seconds[what] = round(time.monotonic() - started, 1)
    for name in LEARNER_WRITABLE:
        (root / name).mkdir()
    say(f"[{len(steps) + 1}/{len(steps) + 1}] sharing with group "
        f"{grp.getgrgid(gid).gr_name} (read-only) ...")
    share_with_group(root, gid)
    blockers = learner_blockers(root / "env" / "bin" / "python")
    size = footprint([root])
    description = {
        "schema": CLASS_SCHEMA, "name": root.name, "learners": learners, "slots": slots,
        "workspaces_in": place, "made_by": user_name(),
        "made_on": time.strftime("%Y-%m-%d %H:%M"), "lab_commit": _commit(source),
        "python": subprocess.run([str(root / "env" / "bin" / "python"), "-c",
                                  "import platform; print(platform.python_version())"],
                                 capture_output=True, text=True).stdout.strip(),
        "group": grp.getgrgid(gid).gr_name, "reservation": reservation, "account": account,
        "files": size.files, "bytes": size.bytes, "seconds": seconds,
        "learners_cannot_enter": blockers,
    }
    replace_json(root / CLASS_FILE, description, indent=1)
    os.chown(root / CLASS_FILE, -1, gid)
    os.chmod(root / CLASS_FILE, 0o640)
    return SetupReport(root, description, size.files, size.bytes, seconds)
