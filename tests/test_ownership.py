"""What the lab may delete: only folders it provably made, for this user, checked and deleted
through one open handle (iolab.core.owned), and private while they exist.

One user here; tests/test_two_users.py plays the other user (as root, in CI). The race
between a check and a delete is made certain with the removers' test hook, not left to luck.
"""

from __future__ import annotations

import getpass
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iolab.core import cleanup, owned
from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir, remove_tree, results_dir
from iolab.core.markers import LOCATION_MARKER, MADE_MARKER, MADE_MARKER_TEXT, is_lab_made
from iolab.core.owned import PAUSE_ENV, discard_owned, has_marker, parse_mount_id, remove_owned
from iolab.core.workspace import location_dir, make_location_dir

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def tree(root: Path) -> dict[str, str]:
    """Every entry below `root`, links not followed: relative path -> what it is."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = "file:" + path.read_bytes().hex()
    return found


def victim(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder of the user's own, outside the workspace, holding a lab marker of its own
    (the worst case: a remover that follows a link there would find it 'marked')."""
    home = ensure_writable_dir(tmp_path / "victim")
    (home / "thesis.tex").write_text("years of work\n")
    (home / "sub").mkdir()
    (home / "sub" / "data.csv").write_text("1,2,3\n")
    return home, tree(home)


def clean_here(workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("IOLAB_WORKDIR", str(workspace))
    monkeypatch.setattr(cleanup, "location_dirs", lambda: [])
    assert cleanup.clean() == 0


# --------------------------------------------------------------------------- the marker


def test_a_lab_folder_is_private_and_bound_to_its_identity(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = ensure_writable_dir(tmp_path / "ws")
    finally:
        os.umask(old)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE((made / MADE_MARKER).stat().st_mode) == 0o600
    assert is_lab_made(made)
    moved = tmp_path / "moved"
    made.rename(moved)  # a move keeps the folder: still the lab's
    assert is_lab_made(moved)


def test_a_copy_of_a_lab_folder_is_not_the_labs(tmp_path: Path, monkeypatch) -> None:
    ws = ensure_writable_dir(tmp_path / "ws")
    dataset = ensure_writable_dir(ws / "dataset")
    (dataset / "f.csv").write_text("x")
    shutil.copytree(dataset, ws / "backup")  # `cp -r`: the marker comes along
    (ws / "backup" / "notes.txt").write_text("my notes")
    subprocess.run(["cp", "-a", str(dataset), str(ws / "restored")], check=True)
    assert not is_lab_made(ws / "backup") and not is_lab_made(ws / "restored")
    clean_here(ws, monkeypatch)
    assert sorted(p.name for p in ws.iterdir()) == [MADE_MARKER, "backup", "restored"]
    assert (ws / "backup" / "notes.txt").read_text() == "my notes"


def test_a_hand_made_or_linked_marker_proves_nothing(tmp_path: Path) -> None:
    real = ensure_writable_dir(tmp_path / "real")
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / MADE_MARKER).write_text((real / MADE_MARKER).read_text())  # another folder's
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / MADE_MARKER).symlink_to(real / MADE_MARKER)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / MADE_MARKER).write_text("made by the storage I/O lab\n")
    assert is_lab_made(real)
    assert not any(is_lab_made(p) for p in (forged, linked, plain))
    (tmp_path / "link-to-real").symlink_to(real)
    assert not is_lab_made(tmp_path / "link-to-real")  # the name is a link: never followed


def test_a_fifo_as_marker_does_not_hang(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    os.mkfifo(folder / MADE_MARKER)
    assert not has_marker(folder, MADE_MARKER)


def test_parents_of_a_named_path_are_never_marked(tmp_path: Path, monkeypatch) -> None:
    """`--data ~/projects/iolab-data` with IOLAB_WORKDIR=$HOME: ~/projects stays the user's."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("IOLAB_WORKDIR", str(home))
    data = ensure_writable_dir(home / "projects" / "iolab-data")
    assert is_lab_made(data) and not is_lab_made(home / "projects")
    (home / "projects" / "paper.tex").write_text("draft")
    clean_here(home, monkeypatch)
    assert (home / "projects" / "paper.tex").read_text() == "draft"


def test_the_workspace_and_its_entries_are_marked_when_made(tmp_path: Path, monkeypatch) -> None:
    ws = tmp_path / "deep" / "ws"
    monkeypatch.setenv("IOLAB_WORKDIR", str(ws))
    ensure_writable_dir(ws / "tmp" / "run-1")
    assert is_lab_made(ws) and is_lab_made(ws / "tmp") and is_lab_made(ws / "tmp" / "run-1")
    assert not is_lab_made(tmp_path / "deep")


# --------------------------------------------------------------------------- per-user places


def clean_only_in(base: Path, workspace: Path, monkeypatch) -> None:
    """`clean` with `base` as the only place outside the workspace (as TMPDIR)."""
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(cleanup, "SYSTEM_BASES", ())
    for name in cleanup.LOCATION_BASES:
        if name != "TMPDIR":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IOLAB_WORKDIR", str(workspace))
    assert cleanup.clean() == 0


def test_a_taken_location_name_gets_a_private_folder_instead(tmp_path: Path, capsys) -> None:
    base = tmp_path / "shm"
    base.mkdir()
    taken = location_dir(base)
    taken.mkdir()
    (taken / LOCATION_MARKER).write_text("")  # someone else's idea of a marker
    (taken / "theirs.txt").write_text("not yours")
    mine = make_location_dir(taken)
    err = capsys.readouterr().err
    assert mine != taken and "left it alone" in err and err.count("\n") == 1
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    assert location_dir(base) == mine  # found again by the next command, and by `clean`
    assert (taken / "theirs.txt").read_text() == "not yours"


def test_clean_removes_private_fallbacks_and_nothing_else(tmp_path: Path, monkeypatch) -> None:
    base = tmp_path / "tmp"
    base.mkdir()
    taken = location_dir(base)
    taken.write_text("a file by my name")
    mine = make_location_dir(taken)
    (mine / "result.json").write_text("{}")
    (base / (taken.name + "-not-mine")).mkdir()
    clean_only_in(base, tmp_path / "ws", monkeypatch)
    assert sorted(p.name for p in base.iterdir()) == [taken.name, taken.name + "-not-mine"]
    assert taken.read_text() == "a file by my name"


# --------------------------------------------------------------------------- check, then delete


def test_a_name_swapped_for_a_link_after_the_check_leads_nowhere(
    tmp_path: Path, monkeypatch
) -> None:
    ws = ensure_writable_dir(tmp_path / "ws")
    dataset = ensure_writable_dir(ws / "dataset")
    (dataset / "big.bin").write_bytes(b"0" * 1000)
    home, before = victim(tmp_path)

    def swap(name: str) -> None:
        if name == "dataset":
            (ws / "dataset").rename(ws / "parked")
            (ws / "dataset").symlink_to(home)

    monkeypatch.setattr(owned, "before_delete", swap)
    clean_here(ws, monkeypatch)
    assert tree(home) == before
    assert list((ws / "parked").iterdir()) == []  # the folder that was checked was emptied


def test_the_race_in_a_real_clean_process(tmp_path: Path) -> None:
    """The same swap against `python -m iolab clean` as a process, paused by its hook."""
    ws = ensure_writable_dir(tmp_path / "ws")
    (ensure_writable_dir(ws / "dataset") / "f").write_text("x")
    home, before = victim(tmp_path)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pause-dataset").touch()
    env = {
        **os.environ,
        "IOLAB_WORKDIR": str(ws),
        PAUSE_ENV: str(hooks),
        "TMPDIR": str(tmp_path / "no-such-base"),
    }
    proc = subprocess.Popen(
        [
            PY,
            "-c",
            "import iolab.core.cleanup as c; c.SYSTEM_BASES = (); "
            "import sys; sys.argv[1:] = ['clean']; from iolab.cli import run; run()",
        ],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not (hooks / "paused-dataset").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    (ws / "dataset").rename(ws / "parked")
    (ws / "dataset").symlink_to(home)
    (hooks / "resume-dataset").touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert tree(home) == before
    assert (ws / "dataset").is_symlink()


def test_remove_tree_refuses_a_folder_outside_the_workspace(tmp_path: Path, monkeypatch) -> None:
    from iolab.core.errors import LabError

    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    ensure_writable_dir(tmp_path / "ws" / "tmp")
    home, before = victim(tmp_path)
    with pytest.raises(LabError, match="not inside the lab's workspace"):
        remove_tree(home)
    (tmp_path / "ws" / "tmp" / "link").symlink_to(home)
    with pytest.raises(LabError):
        remove_owned(tmp_path / "ws" / "tmp" / "link")
    assert tree(home) == before


def test_a_read_only_lab_folder_is_still_removed(tmp_path: Path, monkeypatch) -> None:
    """Its owner is the user: the lab restores the permission itself, and never asks the
    user to repair a folder they might not own."""
    ws = ensure_writable_dir(tmp_path / "ws")
    inner = ensure_writable_dir(ws / "dataset") / "locked"
    inner.mkdir()
    (inner / "f").write_text("x")
    inner.chmod(0o500)
    (ws / "dataset").chmod(0o500)
    clean_here(ws, monkeypatch)
    assert not ws.exists()


# ------------------------------------------------------------------------- any sequence of commands

NAMES = st.sampled_from(["a", "b", "c", "dataset", "tmp", "lab", "notes"])
BASES = st.sampled_from(["scratch", "shm"])
ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("lab"), NAMES),  # a writer makes a lab folder at the top
        st.tuples(st.just("nested-lab"), NAMES, NAMES),  # --data <user folder>/<name>
        st.tuples(st.just("user-dir"), NAMES),
        st.tuples(st.just("user-file"), NAMES, NAMES),  # a file in a folder (or at the top)
        st.tuples(st.just("copy"), NAMES, NAMES),  # cp -r
        st.tuples(st.just("link"), NAMES, st.sampled_from(["victim", "top"])),
        st.tuples(st.just("forge"), NAMES, NAMES),  # a marker copied into another folder
        st.tuples(st.just("place"), BASES),  # a command works in a shared place
        st.tuples(st.just("squat"), BASES, st.sampled_from(["", "-x1", "-x2"])),  # a taken name
        st.tuples(st.just("restore"), st.integers(0, 6)),  # a lab folder emptied, then restored
    ),
    max_size=16,
)


def apply(
    action: tuple, ws: Path, outside: Path, bases: Path, lab_made: set[str], lab_places: set[str]
) -> None:
    """One step of a user's and the lab's life in the workspace `ws` and the shared places."""
    kind, name, *rest = action
    if kind == "restore":
        if not lab_made:
            return
        name = sorted(lab_made)[name % len(lab_made)]
    path = ws / name
    if kind == "lab" and not os.path.lexists(path):
        (ensure_writable_dir(path) / "result.bin").write_bytes(name.encode())
        lab_made.add(name)
    elif kind == "nested-lab" and path.is_dir() and not path.is_symlink() and name not in lab_made:
        ensure_writable_dir(path / rest[0])
    elif kind == "user-dir" and not os.path.lexists(path):
        path.mkdir()
    elif kind == "user-file":
        folder = path if path.is_dir() and not path.is_symlink() and name not in lab_made else ws
        target = folder / f"{rest[0]}.txt"
        if not os.path.lexists(target):
            target.write_text(f"{name}/{rest[0]}")
    elif (
        kind == "copy"
        and path.is_dir()
        and not path.is_symlink()
        and not os.path.lexists(ws / rest[0])
    ):
        shutil.copytree(path, ws / rest[0], symlinks=True)
    elif kind == "link" and not os.path.lexists(path):
        path.symlink_to(outside if rest[0] == "victim" else ws)
    elif kind == "forge" and path.is_dir() and not path.is_symlink() and name not in lab_made:
        source = ws / rest[0] / MADE_MARKER
        if source.is_file() and not (path / MADE_MARKER).exists():
            shutil.copy(source, path / MADE_MARKER)
    elif kind == "restore":
        backup = outside.parent / "backup"
        shutil.copytree(path, backup, symlinks=True)  # modes and times kept, as cp -a does
        for entry in path.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        shutil.copytree(backup, path, symlinks=True, dirs_exist_ok=True)  # into the same folder
        shutil.rmtree(backup)
        lab_made.discard(name)  # the user's now: the folder's inode is the same, not the seal
    elif kind == "place":
        place = make_location_dir(location_dir(bases / name))
        (place / "fio.json").write_text("{}")
        lab_places.add(str(place.relative_to(bases)))
    elif kind == "squat":
        taken = location_dir(bases / name).with_name(f"iolab-{getpass.getuser()}{rest[0]}")
        if not os.path.lexists(taken):
            taken.mkdir()
            (taken / LOCATION_MARKER).write_text("")  # a hand-made marker proves nothing
            (taken / "theirs.txt").write_text("not the lab's")


@settings(
    max_examples=80,
    deadline=None,
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(actions=ACTIONS, workspace_made_by_lab=st.booleans())
@pytest.mark.slow
def test_clean_removes_exactly_the_labs_folders(
    actions, workspace_made_by_lab: bool, monkeypatch
) -> None:
    """After any sequence of lab folders, user files and folders, copies, restores, links,
    forged markers, shared places and names taken in them, `clean` removes exactly what the
    lab made: the marked folders at the top of the workspace and the places it made for this
    user."""
    with tempfile.TemporaryDirectory() as scratch, monkeypatch.context() as patch:
        ws, outside, bases = (Path(scratch) / name for name in ("ws", "victim", "bases"))
        outside.mkdir()
        (outside / "precious.txt").write_text("keep")
        (outside / MADE_MARKER).write_text("a marker: must not matter")
        for base in ("scratch", "shm"):
            (bases / base).mkdir(parents=True)
        patch.setattr(cleanup, "SYSTEM_BASES", (str(bases / "shm"),))
        for variable in cleanup.LOCATION_BASES:
            patch.delenv(variable, raising=False)
        patch.setenv("SCRATCH", str(bases / "scratch"))
        patch.setenv("IOLAB_WORKDIR", str(ws))
        if workspace_made_by_lab:
            ensure_writable_dir(ws)
        else:
            ws.mkdir()
        lab_made: set[str] = set()
        lab_places: set[str] = set()
        for action in actions:
            apply(action, ws, outside, bases, lab_made, lab_places)
        before, outside_before, bases_before = tree(ws), tree(outside), tree(bases)
        assert cleanup.clean() == 0
        expected = {rel: what for rel, what in before.items() if rel.split("/")[0] not in lab_made}
        if workspace_made_by_lab and set(expected) <= {MADE_MARKER}:
            assert not ws.exists()
        else:
            assert tree(ws) == expected
        assert tree(outside) == outside_before
        assert tree(bases) == {
            rel: what
            for rel, what in bases_before.items()
            if "/".join(rel.split("/")[:2]) not in lab_places
        }


def test_places_under_a_linked_base_are_made_and_cleaned(tmp_path: Path, monkeypatch) -> None:
    """$SCRATCH is often a link to the real file system: only the last part of a path the lab
    deletes must not be a link, the base may be one."""
    real = tmp_path / "lustre" / "scratch"
    real.mkdir(parents=True)
    linked = tmp_path / "scratch"
    linked.symlink_to(real)
    place = make_location_dir(location_dir(linked))
    (place / "result.json").write_text("{}")
    run = place / "run-1"
    run.mkdir()
    remove_owned(run)  # a run's scratch folder, reached through the link
    assert not run.exists()
    monkeypatch.setattr(cleanup, "SYSTEM_BASES", ())
    for variable in cleanup.LOCATION_BASES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("SCRATCH", str(linked))
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    assert cleanup.clean() == 0
    assert list(real.iterdir()) == [] and linked.is_symlink()


def test_removing_what_is_gone_with_its_folder_is_fine(tmp_path: Path) -> None:
    """A run's cleanup after `clean` took the whole workspace meanwhile (seen with sshfs)."""
    remove_owned(tmp_path / "gone" / "run-1")
    assert not (tmp_path / "gone").exists()


def test_a_folder_whose_marker_cannot_be_written_is_not_left(tmp_path: Path, monkeypatch) -> None:
    """A full disk between the folder and its marker: no unmarked folder stays behind."""
    import errno

    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if b"identity:" in data:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    from iolab.core.errors import LabError

    with pytest.raises(LabError, match="No space left"):
        ensure_writable_dir(tmp_path / "ws")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_marker_write_cut_short_leaves_the_old_marker_or_none(
    tmp_path: Path, monkeypatch
) -> None:
    """Ctrl-C while the marker is written (the CI flake of make_images): no empty marker, which
    the next run would refuse as not the lab's, and no partial file stays behind."""
    folder = tmp_path / "out"
    folder.mkdir()
    real_write = os.write

    def interrupted(fd: int, data: bytes) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        owned.write_marker(folder, ".iolab-images", "made by the lab")
    assert sorted(os.listdir(folder)) == []
    monkeypatch.setattr(os, "write", real_write)
    owned.write_marker(folder, ".iolab-images", "made by the lab")
    monkeypatch.setattr(os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        owned.write_marker(folder, ".iolab-images", "made by the lab, again")
    monkeypatch.setattr(os, "write", real_write)
    assert sorted(os.listdir(folder)) == [".iolab-images"] and has_marker(folder, ".iolab-images")


def test_ctrl_c_just_after_the_partial_marker_is_created_removes_it(
    tmp_path: Path, monkeypatch
) -> None:
    """Ctrl-C the moment os.open has created the partial marker, before Python holds its
    handle anywhere (the CI flake of make_images under SIGINT): it goes with the run."""
    folder = tmp_path / "out"
    folder.mkdir()
    real_open = os.open

    def interrupted_after_creation(path, flags, mode=0o777, *, dir_fd=None):
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if str(path).endswith(".partial"):
            os.close(fd)
            raise KeyboardInterrupt
        return fd

    monkeypatch.setattr(os, "open", interrupted_after_creation)
    with pytest.raises(KeyboardInterrupt):
        owned.write_marker(folder, ".iolab-images", "made by the lab")
    monkeypatch.undo()
    assert os.listdir(folder) == []


@pytest.mark.slow
def test_clean_finds_the_scratch_folder_of_a_killed_job(tmp_path: Path, monkeypatch) -> None:
    """A short job (advise, the O_DIRECT probe) killed by SIGKILL never reaches its own
    cleanup; its hidden scratch folder is marked, so `clean` removes it, and only it."""
    base = tmp_path / "tmp"
    base.mkdir()
    child = subprocess.Popen(
        [
            PY,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from iolab.storage.locations import _inspect, private_scratch\n"
            "with private_scratch(_inspect('tmp', Path(sys.argv[1])), 'advise') as d:\n"
            "    (d / 'test.bin').write_bytes(b'x' * 4096)\n"
            "    print(d, flush=True)\n"
            "    time.sleep(120)\n",
            str(base),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws")},
    )
    work = Path(child.stdout.readline().strip())
    child.kill()
    child.wait()
    child.stdout.close()
    left = work.parent
    assert left.parent == base and left.name.startswith(f".iolab-{getpass.getuser()}-advise-")
    assert (work / "test.bin").exists() and has_marker(left, MADE_MARKER)
    lookalike = base / f".iolab-{getpass.getuser()}-advise-mine"  # the user's own, unmarked
    lookalike.mkdir()
    clean_only_in(base, tmp_path / "ws", monkeypatch)
    assert sorted(p.name for p in base.iterdir()) == [lookalike.name]


# --------------------------------------------------------------------------- restores


@pytest.fixture(params=["birth time", "ctime"])
def seal(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch) -> str:
    """What seals the markers: the birth time where the file system keeps one, else ctime
    (NFS, older ext4 with 128-byte inodes): both cases are run."""
    real = owned.statx_field
    if request.param == "ctime":
        monkeypatch.setattr(
            owned,
            "statx_field",
            lambda fd, want: None if want == owned.STATX_BTIME else real(fd, want),
        )
    else:
        fd = os.open(tmp_path, os.O_RDONLY)
        try:
            if real(fd, owned.STATX_BTIME) is None:
                pytest.skip("the tests' temporary folder keeps no birth time (statx)")
        finally:
            os.close(fd)
    return request.param


def back_up(folder: Path, backup: Path, tool: str) -> None:
    """The user's backup of `folder` into the folder `backup`: `tar cpf` or `cp -a`."""
    if tool == "tar":
        subprocess.run(
            ["tar", "cpf", str(backup / "backup.tar"), "-C", str(folder.parent), folder.name],
            check=True,
        )
    else:
        subprocess.run(["cp", "-a", str(folder), str(backup)], check=True)


def restore(folder: Path, backup: Path, tool: str) -> None:
    """Bring `folder` back from `backup` as it was: `tar xpf` or `cp -a`."""
    if tool == "tar":
        subprocess.run(
            ["tar", "xpf", str(backup / "backup.tar"), "-C", str(folder.parent)], check=True
        )
    else:
        subprocess.run(["cp", "-a", str(backup / folder.name), str(folder.parent)], check=True)


def delete_and_restore(folder: Path, tmp_path: Path, tool: str, whole: bool) -> None:
    """Back `folder` up, delete it (`whole`) or everything in it, and restore it."""
    backup = tmp_path / "backup"
    backup.mkdir()
    back_up(folder, backup, tool)
    if whole:
        shutil.rmtree(folder)
    else:  # the folder stays, so its inode is certainly the same after the restore
        for entry in folder.iterdir():
            entry.unlink()
    restore(folder, backup, tool)


@pytest.mark.parametrize("whole", [True, False], ids=["folder-deleted", "contents-deleted"])
@pytest.mark.parametrize("tool", ["tar", "cp"])
def test_a_restored_lab_folder_is_not_the_labs(
    tool: str, whole: bool, seal: str, tmp_path: Path, monkeypatch
) -> None:
    """The user's notes in a lab folder, backed up, deleted and restored: the inode numbers
    may come back (always, when only the contents were deleted), the marker's seal cannot,
    so `clean` keeps the restored notes and the lab refuses to write there."""
    ws = tmp_path / "ws"
    monkeypatch.setenv("IOLAB_WORKDIR", str(ws))
    lab = results_dir()
    (lab / "notes.md").write_text("my notes\n")
    assert is_lab_made(lab)
    delete_and_restore(lab, tmp_path, tool, whole)
    assert (lab / MADE_MARKER).read_bytes() and not is_lab_made(lab)
    with pytest.raises(LabError, match="not made by the lab for you"):
        results_dir()
    clean_here(ws, monkeypatch)
    assert (lab / "notes.md").read_text() == "my notes\n"


@pytest.mark.needs("mounts")
@pytest.mark.parametrize("tool", ["tar", "cp"])
def test_a_restore_on_a_fresh_ext4_brings_the_inode_back_but_not_the_labs_mark(
    tool: str, tmp_path: Path, monkeypatch
) -> None:
    """The case of issue 35 as found: on a fresh ext4, a lab folder deleted and restored gets
    its old inode numbers back; `clean` must still keep the user's restored notes."""
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 not found (Debian package e2fsprogs)")
    image, disk = tmp_path / "ext4.img", tmp_path / "disk"
    with image.open("wb") as handle:
        handle.truncate(64 * 1024**2)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(disk)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {mounted.stderr.strip()}")
    try:
        ws = disk / "ws"
        monkeypatch.setenv("IOLAB_WORKDIR", str(ws))
        lab = results_dir()
        (lab / "notes.md").write_text("my notes\n")
        inode = lab.stat().st_ino
        delete_and_restore(lab, tmp_path, tool, whole=True)  # the backup off the disk
        assert lab.stat().st_ino == inode  # what fooled the previous proof
        assert not is_lab_made(lab)
        clean_here(ws, monkeypatch)
        assert (lab / "notes.md").read_text() == "my notes\n"
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_the_seal_is_in_the_users_private_registry(tmp_path: Path, monkeypatch) -> None:
    """One private entry per marker, found again by a fresh interpreter, gone with its folder;
    a marker whose entry is gone proves nothing."""
    registry = tmp_path / "state" / "iolab" / "markers"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ws = ensure_writable_dir(tmp_path / "ws")
    data = ensure_writable_dir(ws / "dataset")
    (data / "notes.md").write_text("added later\n")  # ordinary use keeps the mark
    entries = sorted(registry.iterdir())
    assert len(entries) == 2 and stat.S_IMODE(registry.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(entry.stat().st_mode) == 0o600 for entry in entries)
    found = subprocess.run(
        [
            PY,
            "-c",
            "import sys; from iolab.core.markers import is_lab_made;"
            " print(is_lab_made(sys.argv[1]))",
            str(data),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert found.stdout.strip() == "True"
    clean_here(ws, monkeypatch)
    assert not ws.exists() and list(registry.iterdir()) == []
    again = ensure_writable_dir(tmp_path / "again")
    for entry in registry.iterdir():
        entry.unlink()
    assert not is_lab_made(again)


def test_a_marker_of_the_previous_version_is_refused_in_one_sentence(
    tmp_path: Path, monkeypatch
) -> None:
    """A marker bound to its folder without a seal (as the previous version wrote it) is
    what a restore forges, so it proves nothing: the lab says so, and `clean` keeps it."""
    ws = tmp_path / "ws"
    monkeypatch.setenv("IOLAB_WORKDIR", str(ws))
    lab = ws / "lab"
    lab.mkdir(parents=True, mode=0o700)
    fd = owned.open_dir(lab)
    try:
        identity = " ".join(f"{key}={value}" for key, value in owned._identity(fd).items())
    finally:
        os.close(fd)
    (lab / MADE_MARKER).write_text(MADE_MARKER_TEXT + f"identity: {identity}\n")
    (lab / "notes.md").write_text("mine\n")
    assert not is_lab_made(lab) and owned.has_old_marker(lab, MADE_MARKER)
    with pytest.raises(LabError, match=r"made by an older version of the lab.*rm -r"):
        results_dir()
    clean_here(ws, monkeypatch)
    assert (lab / "notes.md").read_text() == "mine\n"


# --------------------------------------------------------------------------- mount points


def test_the_mount_id_is_read_from_fdinfo(tmp_path: Path, monkeypatch) -> None:
    """/proc/self/fdinfo's mnt_id, parsed; and it names the same mount statx does."""
    assert parse_mount_id("pos:\t0\nflags:\t02100000\nmnt_id:\t31\nino:\t1234\n") == 31
    assert parse_mount_id("pos:\t0\nflags:\t0\n") is None
    assert parse_mount_id("mnt_id:\tnot-a-number\n") is None
    here, proc = os.open(tmp_path, os.O_RDONLY), os.open("/proc", os.O_RDONLY)
    try:
        by_statx = [owned.statx_field(fd, owned.STATX_MNT_ID) for fd in (here, proc)]
        monkeypatch.setattr(owned, "statx_field", lambda fd, want: None)
        by_fdinfo = [owned.mount_id(fd) for fd in (here, proc)]
        assert None not in by_fdinfo and by_fdinfo[0] != by_fdinfo[1]
        assert by_statx in ([None, None], by_fdinfo)
    finally:
        os.close(here)
        os.close(proc)


@pytest.fixture
def bind_mount():
    """mount --bind, each mount undone after the test."""
    mounted: list[Path] = []

    def bind(source: Path, target: Path) -> None:
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
        mounted.append(target)

    yield bind
    for target in reversed(mounted):
        subprocess.run(["umount", str(target)], check=True)


@pytest.mark.needs("mounts")
@pytest.mark.parametrize("mount_ids", ["statx", "fdinfo"])
def test_no_remover_enters_a_bind_mount(
    mount_ids: str, tmp_path: Path, monkeypatch, bind_mount
) -> None:
    """A bind mount of the same file system has the same device number: `iolab lab`'s
    discard of lab/notebooks emptied its source and made it 0700. Now no remover enters a
    mount point, whether it is the folder to delete or one inside it."""
    if mount_ids == "fdinfo":  # a kernel before 5.8: no STATX_MNT_ID
        real = owned.statx_field
        monkeypatch.setattr(
            owned,
            "statx_field",
            lambda fd, want: None if want == owned.STATX_MNT_ID else real(fd, want),
        )
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "results.csv").write_text("1,2\n")
    (project / "sub" / "more.csv").write_text("3,4\n")
    project.chmod(0o755)
    before = tree(project)
    ws = tmp_path / "ws"
    monkeypatch.setenv("IOLAB_WORKDIR", str(ws))
    lab = results_dir()
    (lab / "notebooks").mkdir()
    bind_mount(project, lab / "notebooks")
    (lab / "site" / "deep").mkdir(parents=True)
    (lab / "site" / "index.html").write_text("<html>")
    bind_mount(project, lab / "site" / "deep")
    assert not discard_owned(lab / "notebooks")
    with pytest.raises(LabError, match="mounted there"):
        remove_owned(lab / "notebooks")
    assert not discard_owned(lab / "site")
    parent = owned.open_dir(ws)  # as `clean` does, without its check of the mount table
    try:
        with pytest.raises(LabError, match="in place: .*mounted there"):
            owned.remove_marked(parent, "lab", (MADE_MARKER,), lab)
    finally:
        os.close(parent)
    assert tree(project) == before
    assert stat.S_IMODE(project.stat().st_mode) == 0o755
