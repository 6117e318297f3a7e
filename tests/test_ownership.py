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
from iolab.core.owned import PAUSE_ENV, has_marker, remove_owned
from iolab.core.workspace import (LOCATION_MARKER, MADE_MARKER, ensure_writable_dir, is_lab_made,
                                  location_dir, make_location_dir, remove_tree)

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


def test_the_workspace_and_its_entries_are_marked_when_made(tmp_path: Path,
                                                            monkeypatch) -> None:
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


def test_a_name_swapped_for_a_link_after_the_check_leads_nowhere(tmp_path: Path,
                                                                 monkeypatch) -> None:
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
    env = {**os.environ, "IOLAB_WORKDIR": str(ws), PAUSE_ENV: str(hooks),
           "TMPDIR": str(tmp_path / "no-such-base")}
    proc = subprocess.Popen(
        [PY, "-c", "import iolab.core.cleanup as c; c.SYSTEM_BASES = (); "
                   "import sys; sys.argv[1:] = ['clean']; from iolab.cli import run; run()"],
        cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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


def test_remove_tree_refuses_a_folder_outside_the_workspace(tmp_path: Path,
                                                             monkeypatch) -> None:
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


# --------------------------------------------------------------------------- any sequence of commands

NAMES = st.sampled_from(["a", "b", "c", "dataset", "tmp", "lab", "notes"])
BASES = st.sampled_from(["scratch", "shm"])
ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("lab"), NAMES),             # a writer makes a lab folder at the top
    st.tuples(st.just("nested-lab"), NAMES, NAMES),  # --data <user folder>/<name>
    st.tuples(st.just("user-dir"), NAMES),
    st.tuples(st.just("user-file"), NAMES, NAMES),   # a file in a folder (or at the top)
    st.tuples(st.just("copy"), NAMES, NAMES),        # cp -r
    st.tuples(st.just("link"), NAMES, st.sampled_from(["victim", "top"])),
    st.tuples(st.just("forge"), NAMES, NAMES),       # a marker copied into another folder
    st.tuples(st.just("place"), BASES),              # a command works in a shared place
    st.tuples(st.just("squat"), BASES, st.sampled_from(["", "-x1", "-x2"])),  # a taken name
), max_size=16)


def apply(action: tuple, ws: Path, outside: Path, bases: Path, lab_made: set[str],
          lab_places: set[str]) -> None:
    """One step of a user's and the lab's life in the workspace `ws` and the shared places."""
    kind, name, *rest = action
    path = ws / name
    if kind == "lab" and not os.path.lexists(path):
        (ensure_writable_dir(path) / "result.bin").write_bytes(name.encode())
        lab_made.add(name)
    elif kind == "nested-lab" and path.is_dir() and not path.is_symlink() \
            and name not in lab_made:
        ensure_writable_dir(path / rest[0])
    elif kind == "user-dir" and not os.path.lexists(path):
        path.mkdir()
    elif kind == "user-file":
        folder = path if path.is_dir() and not path.is_symlink() and name not in lab_made else ws
        target = folder / f"{rest[0]}.txt"
        if not os.path.lexists(target):
            target.write_text(f"{name}/{rest[0]}")
    elif kind == "copy" and path.is_dir() and not path.is_symlink() \
            and not os.path.lexists(ws / rest[0]):
        shutil.copytree(path, ws / rest[0], symlinks=True)
    elif kind == "link" and not os.path.lexists(path):
        path.symlink_to(outside if rest[0] == "victim" else ws)
    elif kind == "forge" and path.is_dir() and not path.is_symlink() and name not in lab_made:
        source = ws / rest[0] / MADE_MARKER
        if source.is_file() and not (path / MADE_MARKER).exists():
            shutil.copy(source, path / MADE_MARKER)
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


@settings(max_examples=80, deadline=None, database=None,  # nothing written into the checkout
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS, workspace_made_by_lab=st.booleans())
def test_clean_removes_exactly_the_labs_folders(actions, workspace_made_by_lab: bool,
                                                monkeypatch) -> None:
    """After any sequence of lab folders, user files and folders, copies, links, forged
    markers, shared places and names taken in them, `clean` removes exactly what the lab made:
    the marked folders at the top of the workspace and the places it made for this user."""
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
        expected = {rel: what for rel, what in before.items()
                    if rel.split("/")[0] not in lab_made}
        if workspace_made_by_lab and set(expected) <= {MADE_MARKER}:
            assert not ws.exists()
        else:
            assert tree(ws) == expected
        assert tree(outside) == outside_before
        assert tree(bases) == {rel: what for rel, what in bases_before.items()
                               if "/".join(rel.split("/")[:2]) not in lab_places}


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


def test_a_folder_whose_marker_cannot_be_written_is_not_left(tmp_path: Path,
                                                            monkeypatch) -> None:
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


def test_a_marker_write_cut_short_leaves_the_old_marker_or_none(tmp_path: Path, monkeypatch) -> None:
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


def test_clean_finds_the_scratch_folder_of_a_killed_job(tmp_path: Path, monkeypatch) -> None:
    """A short job (advise, the O_DIRECT probe) killed by SIGKILL never reaches its own
    cleanup; its hidden scratch folder is marked, so `clean` removes it, and only it."""
    base = tmp_path / "tmp"
    base.mkdir()
    child = subprocess.Popen(
        [PY, "-c", "import sys, time\n"
                   "from pathlib import Path\n"
                   "from iolab.storage.locations import _inspect, private_scratch\n"
                   "with private_scratch(_inspect('tmp', Path(sys.argv[1])), 'advise') as d:\n"
                   "    (d / 'test.bin').write_bytes(b'x' * 4096)\n"
                   "    print(d, flush=True)\n"
                   "    time.sleep(120)\n", str(base)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws")})
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
