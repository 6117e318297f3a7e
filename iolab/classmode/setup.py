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

A class folder is refused where someone else could rename it or a folder above it
(preflight.rename_risk). The class folder is opened once, without following a link, and
held to the end: everything the setup writes, and the sharing, goes through that handle and
the handles opened from it, links changed themselves and never followed; the build steps,
which run as programs and need the path, are each followed by a check that the path still
leads to the held folder, and the setup stops in one sentence when it does not.
"""

from __future__ import annotations

import contextlib
import errno
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
from pathlib import Path, PurePath

from iolab.classmode.layout import (
    CLASS_MARKER,
    CLASS_MARKER_TEXT,
    DEFAULT_SLOTS,
    FOLDER_MADE,
    LEARNER_WRITABLE,
    MAX_SLOTS,
)
from iolab.classmode.load import class_load
from iolab.classmode.preflight import check_places
from iolab.classmode.teardown import held_size, marker_text, remove_made
from iolab.core.class_folder import CLASS_ENV, CLASS_FILE, CLASS_SCHEMA
from iolab.core.class_queue import BOUND_KEYS, SILENT_S, TURN_S
from iolab.core.errors import LabError, interrupts_held
from iolab.core.markers import MADE_MARKER, MADE_MARKER_TEXT
from iolab.core.owned import fd_has_marker, open_dir, write_marker_at
from iolab.core.rename_risk import RENAME_FIX, rename_risk
from iolab.core.workspace import public_text, repo_root, user_name
from iolab.storage.locations import discover_locations

SHARED_DIR_MODE = 0o2750
LEARNER_DIR_MODE = 0o3770
#: Not copied from a checkout that is not a git clone: builds, caches and the workspace.
NOT_COPIED = {
    ".git",
    ".venv",
    ".venv-drishti",
    "workspace",
    "_build",
    "jupyter_execute",
    "__pycache__",
    ".pytest_cache",
    "iolab.egg-info",
    CLASS_MARKER,
}
#: The markers the setup writes; the sharing leaves them as they are (a chmod would change
#: the ctime their seal may rest on, iolab.core.owned).
MARKERS = (CLASS_MARKER, MADE_MARKER)
#: How every file the setup writes is created: afresh, never through a link.
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
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
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env)
    except OSError as err:  # no such interpreter (--python), or not one to run
        raise LabError(
            f"{what} failed ({err.strerror}: {argv[0]}); fix that and run "
            "`python -m iolab class setup` again"
        ) from None
    if done.returncode:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise LabError(
            f"{what} failed ({public_text(last)}); fix that and run "
            "`python -m iolab class setup` again"
        )


def _checkout_files(source: Path) -> list[Path]:
    """The checkout's files: what git tracks in a clone, else everything but builds."""
    if (source / ".git").exists() and shutil.which("git"):
        listed = subprocess.run(["git", "-C", str(source), "ls-files", "-z"], capture_output=True)
        if listed.returncode == 0:  # git refuses a checkout another user owns: walk it then
            return [Path(name) for name in listed.stdout.decode().split("\0") if name]
    return [
        path.relative_to(source)
        for path in sorted(source.rglob("*"))
        if path.is_file() and not NOT_COPIED & set(path.relative_to(source).parts)
    ]


def make_marked_dir(
    fd: int, name: str, marker: str = CLASS_MARKER, text: str = CLASS_MARKER_TEXT
) -> None:
    """Make the folder `name` in the open folder `fd`, 0700, and mark it in the same breath,
    so `class clean` can prove it the setup's whatever happens to the setup next (raises
    FileExistsError if the name is taken)."""
    with interrupts_held():
        os.mkdir(name, 0o700, dir_fd=fd)
        try:
            made = open_dir(name, dir_fd=fd)
            try:
                write_marker_at(made, marker, text)
            finally:
                os.close(made)
        except (OSError, LabError):  # unmarked, it would be left alone for good
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=fd)
            raise


def _folder_in(opened: dict[PurePath, int], relative: PurePath) -> int:
    """A handle on the folder `relative` below `opened[PurePath()]`, made if missing, each
    level opened from the one above without following a link (kept in `opened`)."""
    if relative not in opened:
        above = _folder_in(opened, relative.parent)
        with contextlib.suppress(FileExistsError):
            os.mkdir(relative.name, 0o700, dir_fd=above)
        opened[relative] = open_dir(relative.name, dir_fd=above)
    return opened[relative]


def write_new(fd: int, name: str, data: bytes) -> int:
    """Create the file `name` in the open folder `fd` with `data`; returns its open handle,
    for the caller to set its mode and times and close."""
    out = os.open(name, NEW_FILE, 0o600, dir_fd=fd)
    view = memoryview(data)
    while view:
        view = view[os.write(out, view) :]
    return out


def copy_checkout(source: Path, fd: int, name: str) -> int:
    """Copy the lab's files into the new folder `name` of the open folder `fd`, through
    handles (a link of the checkout's is copied as a link); returns how many."""
    files = _checkout_files(source)
    make_marked_dir(fd, name)
    opened = {PurePath(): open_dir(name, dir_fd=fd)}
    try:
        for relative in files:
            folder, origin = _folder_in(opened, PurePath(relative).parent), source / relative
            info = origin.lstat()
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(origin), relative.name, dir_fd=folder)
                continue
            out = write_new(folder, relative.name, origin.read_bytes())
            try:
                os.fchmod(out, stat.S_IMODE(info.st_mode))
                os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(out)
    finally:
        for handle in opened.values():
            os.close(handle)
    return len(files)


def build_environment(root: Path, python: str) -> None:
    """`env/`: the lab's requirements at the locked versions, iolab editable from `lab/`."""
    lab, env = root / "lab", root / "env"
    _run([python, "-m", "venv", str(env)], f"making a virtual environment with {python}")
    pip = [
        str(env / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    _run(
        [*pip, "-c", str(lab / "requirements-lock.txt"), "-r", str(lab / "requirements.txt")],
        "installing the lab's requirements (pip)",
    )
    _run([*pip, "--no-deps", "-e", str(lab)], "installing iolab from the class's copy")


def build_data(root: Path) -> None:
    """The dataset, its archive and shards, and the image-like samples, each verified."""
    python, generators = str(root / "env" / "bin" / "python"), root / "lab" / "data_generators"
    env = {key: value for key, value in os.environ.items() if key != CLASS_ENV}
    dataset, images = root / "dataset", root / "images"
    for script, args in (
        ("generate_data.py", ["--data", str(dataset), "--quiet"]),
        ("create_archive.py", ["--data", str(dataset)]),
        ("make_shards.py", ["--data", str(dataset)]),
        ("make_images.py", ["--data", str(images)]),
    ):
        _run([python, str(generators / script), *args], f"{script}", env)
    for script, data in (
        ("generate_data.py", dataset),
        ("make_shards.py", dataset),
        ("make_images.py", images),
    ):
        _run(
            [python, str(generators / script), "--data", str(data), "--verify"],
            f"verifying with {script}",
            env,
        )


def write_join_files(fd: int, root: Path, reservation: str | None, account: str | None) -> None:
    """The kernel spec (JupyterHub, Open OnDemand) and `activate` (a terminal), written into
    the open class folder `fd`, whose path learners use is `root`."""
    kernel = (
        json.dumps(
            {
                "argv": [
                    str(root / "env" / "bin" / "python"),
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": f"Storage I/O lab (class {root.name})",
                "language": "python",
                "env": {CLASS_ENV: str(root)},
            },
            indent=1,
        )
        + "\n"
    )
    make_marked_dir(fd, "share")
    opened = {PurePath(): open_dir("share", dir_fd=fd)}
    try:
        _close_new(
            _folder_in(opened, PurePath("jupyter", "kernels", KERNEL_NAME)), "kernel.json", kernel
        )
    finally:
        for handle in opened.values():
            os.close(handle)
    slurm = "".join(
        f'export {variable}="${{{variable}:-{value}}}"\n'
        for variable, value in (("SBATCH_RESERVATION", reservation), ("SBATCH_ACCOUNT", account))
        if value
    )
    _close_new(
        fd,
        "activate",
        f"# Join the storage I/O lab's class {root.name}: `source {root}/activate`\n"
        f'export {CLASS_ENV}="{root}"\n'
        f'export PATH="{root}/env/bin:$PATH"\n'
        f'export JUPYTER_PATH="{root}/share/jupyter${{JUPYTER_PATH:+:$JUPYTER_PATH}}"\n'
        f"{slurm}"
        # Into the learner's workspace: the lessons' commands run there as printed.
        '_iolab_workspace="$(python -m iolab class joined --enter)" && cd "$_iolab_workspace"\n'
        "unset _iolab_workspace\n",
    )


def _close_new(fd: int, name: str, text: str) -> None:
    """Create the file `name` in the open folder `fd` with `text` (mode set by the sharing)."""
    os.close(write_new(fd, name, text.encode()))


def share_with_group(
    fd: int, gid: int, mode: int = SHARED_DIR_MODE, learners: tuple[str, ...] = ()
) -> None:
    """Give the open folder `fd` and everything below it to the group: folders `mode`, its
    sub-folders `learners` LEARNER_DIR_MODE, files readable and writable by the instructor
    only. Through handles: every entry is changed as what it was when opened, a link itself
    and never what it leads to; the markers are left as they are."""
    os.fchown(fd, -1, gid)
    os.fchmod(fd, mode)
    for name in sorted(os.listdir(fd)):
        if name in MARKERS:
            continue
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            os.chown(name, -1, gid, dir_fd=fd, follow_symlinks=False)
        elif stat.S_ISDIR(info.st_mode):
            child = open_dir(name, dir_fd=fd)
            try:
                share_with_group(
                    child, gid, LEARNER_DIR_MODE if name in learners else SHARED_DIR_MODE
                )
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode):
            opened = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd
            )
            try:
                os.fchown(opened, -1, gid)
                os.fchmod(opened, 0o750 if os.fstat(opened).st_mode & stat.S_IXUSR else 0o640)
            finally:
                os.close(opened)


def learner_blockers(python: Path) -> list[str]:
    """Folders on the way to the environment's base interpreter that learners cannot enter
    (a Python under the instructor's home): the class's `env` would not start for them."""
    real = python.resolve()
    return [
        str(folder)
        for folder in [*reversed(real.parents)]
        if not folder.stat().st_mode & (stat.S_IXOTH | stat.S_IXGRP)
    ]


def _group(name: str | None) -> int:
    """The class's group: `name`, of which the instructor must be a member, else their own."""
    if name is None:
        return os.getgid()
    try:
        gid = grp.getgrnam(name).gr_gid
    except KeyError:
        raise LabError(
            f"there is no group {name!r}; give the class's Unix group (`id -Gn` lists yours)"
        ) from None
    if gid not in (os.getgid(), *os.getgroups()) and os.getuid() != 0:
        raise LabError(
            f"you are not a member of the group {name!r}, so the class folder "
            "cannot be given to it; ask the centre to add you, or pick one of "
            "`id -Gn`"
        )
    return gid


def _open_parent(root: Path) -> int:
    """A handle on the folder that will hold the class, refused where others may rename."""
    risk = rename_risk(root)
    if risk is not None:
        raise LabError(f"{risk}; {RENAME_FIX}")
    try:
        return open_dir(root.parent.resolve())
    except FileNotFoundError:
        raise LabError(f"{root.parent} does not exist; create it or name another place") from None
    except OSError as err:
        raise LabError(
            f"{root.parent} is not a folder you can use ({err.strerror}); name another place"
        ) from None


def _prepare(parent: int, root: Path) -> int:
    """Make (or accept) the class folder `root` in the open folder `parent` and mark it,
    saying whether a setup made the folder (this one, or the one cut short before it), which
    `class clean` then removes too; returns the handle on it, held for the whole setup."""
    with contextlib.suppress(FileExistsError):  # else accepted below if empty or cut short
        make_marked_dir(parent, root.name, CLASS_MARKER, CLASS_MARKER_TEXT + FOLDER_MADE)
    try:
        fd = open_dir(root.name, dir_fd=parent)
    except OSError as err:
        why = "a link or a file" if err.errno in (errno.ELOOP, errno.ENOTDIR) else err.strerror
        raise LabError(
            f"{root} is not a folder ({why}); name a new or empty folder for the class"
        ) from None
    made = False
    try:
        if os.fstat(fd).st_uid != os.getuid():
            raise LabError(f"{root} belongs to another user; use a folder of your own")
        if fd_has_marker(fd, CLASS_MARKER):
            if CLASS_FILE in os.listdir(fd):
                raise LabError(
                    f"{root} already holds a class; remove it first with "
                    f"`python -m iolab class clean {root}`, then set up again"
                )
            made = FOLDER_MADE in marker_text(fd)
            _, left = remove_made(fd)  # a setup cut short: start again from nothing
            if left:
                raise LabError(
                    f"cannot start again in {root}: {left[0]} could not be "
                    "removed; fix that, or name another folder"
                )
        elif os.listdir(fd):
            raise LabError(f"{root} is not empty; name a new or empty folder for the class")
        os.fchmod(fd, 0o700)  # private until the class is complete
        write_marker_at(fd, CLASS_MARKER, CLASS_MARKER_TEXT + (FOLDER_MADE if made else ""))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _still_there(parent: int, root: Path, fd: int) -> None:
    """Stop the setup if `root` no longer leads to the held class folder `fd`: the build
    steps that ran as programs used the path, and nothing more is done for what it is now."""
    try:
        now = os.stat(root.name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        now = None
    then = os.fstat(fd)
    if now is None or (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino):
        raise LabError(
            f"{root} was moved or replaced while the setup ran, so it stopped "
            "before sharing anything; find out who could rename it, then remove "
            "the moved folder with `python -m iolab class clean` and set up again"
        )


def _write_description(fd: int, description: dict, gid: int) -> None:
    """class.json, last: written beside its name, given to the group, renamed into place."""
    partial = f"{CLASS_FILE}.partial"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial, dir_fd=fd)
    out = write_new(fd, partial, json.dumps(description, indent=1).encode())
    try:
        os.fchown(out, -1, gid)
        os.fchmod(out, 0o640)
    finally:
        os.close(out)
    os.rename(partial, CLASS_FILE, src_dir_fd=fd, dst_dir_fd=fd)


def _commit(source: Path) -> str:
    done = (
        subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        )
        if shutil.which("git")
        else None
    )
    return done.stdout.strip() if done is not None and done.returncode == 0 else "unknown"


def setup_class(
    root: Path,
    learners: int,
    *,
    slots: int = DEFAULT_SLOTS,
    group: str | None = None,
    python: str = sys.executable,
    reservation: str | None = None,
    account: str | None = None,
    queue_bounds: tuple[float, float] = (SILENT_S, TURN_S),
    say: Callable[[str], None] = print,
) -> SetupReport:
    """Build the class in `root` for `learners` learners; see the module docstring.
    `queue_bounds` is (silent_s, turn_s) of the heavy-step queue (iolab.core.class_queue),
    written into class.json for every learner's lab to read."""
    if not 1 <= slots <= MAX_SLOTS:
        raise LabError(
            f"--slots {slots} is outside 1..{MAX_SLOTS}: the login-node budget of "
            "one run is shared by the heavy steps that run at once"
        )
    for (key, (low, high)), value in zip(BOUND_KEYS.items(), queue_bounds, strict=True):
        if not low <= value <= high:
            option = "--" + key.replace("_", "-")
            raise LabError(f"{option} {value:g} is outside {low:g}..{high:g} seconds")
    gid = _group(group)
    load = class_load(learners)
    _, chosen = check_places(load, discover_locations(probe=False))
    place = chosen.name if chosen is not None else "home"
    root = root.expanduser().absolute()
    parent = _open_parent(root)
    try:
        fd = _prepare(parent, root)
        try:
            return _build(
                parent,
                root,
                fd,
                learners,
                slots,
                gid,
                place,
                python,
                reservation,
                account,
                queue_bounds,
                say,
            )
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def _build(
    parent: int,
    root: Path,
    fd: int,
    learners: int,
    slots: int,
    gid: int,
    place: str,
    python: str,
    reservation: str | None,
    account: str | None,
    queue_bounds: tuple[float, float],
    say: Callable[[str], None],
) -> SetupReport:
    """The setup's steps in the prepared class folder `fd` (`root` in `parent`)."""
    seconds: dict[str, float] = {}
    source = repo_root()

    def environment() -> None:
        make_marked_dir(fd, "env")
        build_environment(root, python)

    def datasets() -> None:
        for name in ("dataset", "images"):  # the marker their generators expect
            make_marked_dir(fd, name, MADE_MARKER, MADE_MARKER_TEXT)
        build_data(root)

    steps = (
        ("copy of the lab", lambda: copy_checkout(source, fd, "lab")),
        ("environment", environment),
        ("datasets", datasets),
        ("join files", lambda: write_join_files(fd, root, reservation, account)),
    )
    for number, (what, action) in enumerate(steps, 1):
        say(f"[{number}/{len(steps) + 1}] {what} ...")
        started = time.monotonic()
        action()
        _still_there(parent, root, fd)
        seconds[what] = round(time.monotonic() - started, 1)
    for name in LEARNER_WRITABLE:
        make_marked_dir(fd, name)
    say(
        f"[{len(steps) + 1}/{len(steps) + 1}] sharing with group "
        f"{grp.getgrgid(gid).gr_name} (read-only) ..."
    )
    share_with_group(fd, gid, learners=LEARNER_WRITABLE)
    blockers = learner_blockers(root / "env" / "bin" / "python")
    size = held_size(fd)  # through handles, as the rest: learners may write in queue/ now
    description = {
        "schema": CLASS_SCHEMA,
        "name": root.name,
        "learners": learners,
        "slots": slots,
        **dict(zip(BOUND_KEYS, queue_bounds, strict=True)),
        "workspaces_in": place,
        "made_by": user_name(),
        "made_on": time.strftime("%Y-%m-%d %H:%M"),
        "lab_commit": _commit(source),
        "python": subprocess.run(
            [
                str(root / "env" / "bin" / "python"),
                "-c",
                "import platform; print(platform.python_version())",
            ],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "group": grp.getgrgid(gid).gr_name,
        "reservation": reservation,
        "account": account,
        "files": size.files,
        "bytes": size.bytes,
        "seconds": seconds,
        "learners_cannot_enter": blockers,
    }
    _still_there(parent, root, fd)
    _write_description(fd, description, gid)
    return SetupReport(root, description, size.files, size.bytes, seconds)
