"""Hostile input: what the lab did not write is never replaced, what it must not read is never read.

A login node is shared, and a dataset folder may hold anything: another user's or the user's
own files, a copy made with `cp -r`, a FIFO, a link out of the dataset, a manifest someone
edited. Every case here is one `error:` sentence naming the file, exit 2, no traceback, no
hang (each run has a timeout), and every file -- in the dataset and outside it -- byte for
byte as it was:

(A) a writer never replaces or deletes what the lab did not write: generate_data, make_images
    and make_shards refuse a folder holding such files unless its marker is the lab's (bound
    to the folder: a copy, a hand-made marker or a linked one does not count) or what is there
    verifies; create_archive never writes through a link;
(B) the writer lock survives a full or failing disk (no empty lock is left behind), takes over
    an empty lock a crash left, and is never written through a link;
(C) unreadable, special and linked files, and manifests, archive descriptions and shard
    indexes that are not what the lab writes (wrong types, paths out of the dataset, huge
    numbers, not JSON), for the generators (also --verify) and the readers of the manifest;
(D) numeric options out of range are refused before any work.

The mode-000 cases skip where chmod does not stop reads (as root); the device case needs root.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from iolab.core import dataset as ds
from iolab.core import writer_lock as wl
from iolab.core.errors import LabError
from iolab.core.owned import has_marker

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
FILES = 40  # January and February: two month folders
#: Long enough for a busy 2-core machine; a run that waits on a FIFO would never end.
TIMEOUT = 60
IS_ROOT = os.geteuid() == 0


def _chmod_stops_reads() -> bool:
    """Whether a file with mode 000 is unreadable here: not for root (CAP_DAC_OVERRIDE)."""
    with tempfile.NamedTemporaryFile() as probe:
        os.chmod(probe.name, 0)
        try:
            open(probe.name, "rb").close()
        except PermissionError:
            return True
    return False


not_as_root = pytest.mark.skipif(
    not _chmod_stops_reads(),
    reason="as root chmod 000 does not "
    "stop reads, so no unreadable file can be made; run the tests "
    "as a user",
)
VICTIM = "data/activity_2004_1/activity_2004_1_3.csv"
Chmod = Callable[[Path, int], None]


# --------------------------------------------------------------------------- helpers


def script(path: str, *args: object) -> list[str]:
    return [PY, str(ROOT / path), *map(str, args)]


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)


def assert_refused(proc: subprocess.CompletedProcess, *names: str) -> None:
    """Exit 2 and one `error:` line on stderr naming each of `names`, no traceback."""
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.args, proc.returncode, proc.stdout, err)
    assert "Traceback" not in err, err
    assert err.startswith("error:") and len(err.splitlines()) == 1, err
    for name in names:
        assert name in err, (name, err)


def tree(*roots: Path) -> dict[str, tuple]:
    """Every entry below `roots`: type and mode, a link's target, a regular file's sha256.

    Opens nothing but readable regular files: opening a FIFO to hash it would block.
    """
    state: dict[str, tuple] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for path in [Path(folder), *(Path(folder, name) for name in dirs + files)]:
                st = path.lstat()
                if stat.S_ISLNK(st.st_mode):
                    state[str(path)] = ("link", os.readlink(path))
                elif stat.S_ISREG(st.st_mode) and os.access(path, os.R_OK):
                    state[str(path)] = (st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
                else:
                    state[str(path)] = (st.st_mode, st.st_size if stat.S_ISREG(st.st_mode) else 0)
    return state


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A small dataset with its archive and shards, and an image dataset beside it."""
    base = tmp_path_factory.mktemp("hostile-template")
    d = base / "dataset"
    for argv in (
        script("data_generators/generate_data.py", "--data", d, "--files", FILES, "--quiet"),
        script("data_generators/create_archive.py", "--data", d),
        script("data_generators/make_shards.py", "--data", d, "--samples-per-shard", 10),
        script(
            "data_generators/make_images.py",
            "--data",
            base / "images",
            "--count",
            4,
            "--sample-kb",
            100,
            "--shard-mb",
            0.5,
        ),
    ):
        proc = run(argv)
        assert proc.returncode == 0, proc.stderr
    return base


@pytest.fixture
def place(template: Path, tmp_path: Path) -> Path:
    """A copy (cp -r) of the template: dataset/, images/, and an outside/ folder of the user."""
    shutil.copytree(template, tmp_path, symlinks=True, dirs_exist_ok=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "thesis.tex").write_text("the user's own work\n")
    return tmp_path


@pytest.fixture
def restore_modes() -> Iterator[Chmod]:
    """chmod for one test, undone afterwards so pytest can remove the files."""
    changed: list[tuple[Path, int]] = []

    def chmod(path: Path, mode: int) -> None:
        changed.append((path, path.stat().st_mode))
        path.chmod(mode)

    yield chmod
    for path, mode in reversed(changed):
        with contextlib.suppress(FileNotFoundError):  # a lock taken over is gone
            path.chmod(mode)


def expect_unchanged(place: Path, argv: list[str], *names: str) -> None:
    """Run `argv`: refused in one sentence naming `names`, nothing changed anywhere."""
    before = tree(place)
    assert_refused(run(argv), *names)
    assert tree(place) == before


def edit_json(path: Path, change: Callable[[dict], object], indent: int = 0) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value, indent=indent))


def move_out(place: Path, rel: str) -> Path:
    """Move a data file out of the dataset (to outside/); returns where it went."""
    target = place / "outside" / Path(rel).name
    shutil.move(place / "dataset" / rel, target)
    return target


# --------------------------------------------------------------------------- (C) data files


def fifo(place: Path, chmod: Chmod) -> str:
    victim = place / "dataset" / VICTIM
    victim.unlink()
    os.mkfifo(victim)
    return victim.name


def unix_socket(place: Path, chmod: Chmod) -> str:
    victim = place / "dataset" / VICTIM
    victim.unlink()
    cwd = os.getcwd()
    os.chdir(victim.parent)  # a socket's path must fit in 108 bytes: bind the bare name
    try:
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(victim.name)
    finally:
        os.chdir(cwd)
    return victim.name


def device(place: Path, chmod: Chmod) -> str:
    if not IS_ROOT:
        pytest.skip("making a device node needs root")
    victim = place / "dataset" / VICTIM
    victim.unlink()
    os.mknod(victim, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null: reads as empty
    return victim.name


def link_out_file(place: Path, chmod: Chmod) -> str:
    """The file's own bytes, outside the dataset: following the link would even verify."""
    outside = move_out(place, VICTIM)
    (place / "dataset" / VICTIM).symlink_to(outside)
    return Path(VICTIM).name


def link_out_folder(place: Path, chmod: Chmod) -> str:
    month = place / "dataset" / "data" / "activity_2004_2"
    shutil.move(month, place / "outside" / "activity_2004_2")
    month.symlink_to(place / "outside" / "activity_2004_2")
    return "activity_2004_2"


def link_data(place: Path, chmod: Chmod) -> str:
    data = place / "dataset" / "data"
    shutil.move(data, place / "outside" / "data")
    data.symlink_to(place / "outside" / "data")
    return "data"


def unreadable_file(place: Path, chmod: Chmod) -> str:
    chmod(place / "dataset" / VICTIM, 0)
    return Path(VICTIM).name


def unreadable_folder(place: Path, chmod: Chmod) -> str:
    chmod(place / "dataset" / "data" / "activity_2004_1", 0)
    return "activity_2004_1"


DATA_CASES = [
    fifo,
    unix_socket,
    device,
    link_out_file,
    link_out_folder,
    link_data,
    pytest.param(unreadable_file, marks=not_as_root),
    pytest.param(unreadable_folder, marks=not_as_root),
]


def commands(d: Path) -> dict[str, list[str]]:
    """Every command that reads the dataset `d`, as a learner runs it."""
    return {
        "generate": script(
            "data_generators/generate_data.py", "--data", d, "--files", FILES, "--quiet"
        ),
        "generate-verify": script("data_generators/generate_data.py", "--data", d, "--verify"),
        "archive": script("data_generators/create_archive.py", "--data", d),
        "shards": script("data_generators/make_shards.py", "--data", d, "--samples-per-shard", 10),
        "read_files-verify": script("demos/read_files.py", "--data", d, "--verify"),
        "read_files": script("demos/read_files.py", "--data", d),
        "read_files_naive": script("demos/read_files_naive.py", "--data", d),
        "read_samples": script("demos/read_samples.py", "--source", "files", "--data", d),
    }


@pytest.mark.parametrize("case", DATA_CASES)
@pytest.mark.slow
def test_a_data_file_the_lab_must_not_read_is_refused(
    case, place: Path, restore_modes: Chmod
) -> None:
    name = case(place, restore_modes)
    for argv in commands(place / "dataset").values():
        expect_unchanged(place, argv, name)
    assert not (place / "dataset" / ds.LOCK_NAME).exists()


# --------------------------------------------------------------------------- (C) the manifest


def entry(field: str, value: object) -> Callable[[Path], str]:
    def change(place: Path) -> str:
        edit_json(
            place / "dataset" / ds.MANIFEST_NAME, lambda m: m["files"][2].__setitem__(field, value)
        )
        return f"files[2].{field}"

    change.__name__ = f"{field}-{value!r}"
    return change


def escape(absolute: bool) -> Callable[[Path], str]:
    """A manifest path to a copy of the file outside the dataset: following it would verify."""

    def change(place: Path) -> str:
        rel = json.loads((place / "dataset" / ds.MANIFEST_NAME).read_text())["files"][2]["path"]
        outside = move_out(place, rel)
        target = str(outside) if absolute else os.path.relpath(outside, place / "dataset")
        edit_json(
            place / "dataset" / ds.MANIFEST_NAME,
            lambda m: m["files"][2].__setitem__("path", target),
        )
        return "files[2].path"

    change.__name__ = "escape-absolute" if absolute else "escape-relative"
    return change


def top(field: str, value: object) -> Callable[[Path], str]:
    def change(place: Path) -> str:
        edit_json(place / "dataset" / ds.MANIFEST_NAME, lambda m: m.__setitem__(field, value))
        return field

    change.__name__ = f"{field}-{type(value).__name__}"
    return change


def text(name: str, replace: Callable[[str], str], named: str) -> Callable[[Path], str]:
    """A manifest edited as text: what json.dumps would not write (1e999, 5000 digits)."""

    def change(place: Path) -> str:
        path = place / "dataset" / ds.MANIFEST_NAME
        path.write_text(replace(path.read_text()))
        return named

    change.__name__ = name
    return change


def manifest_fifo(place: Path) -> str:
    path = place / "dataset" / ds.MANIFEST_NAME
    path.unlink()
    os.mkfifo(path)
    return ds.MANIFEST_NAME


def manifest_link(place: Path) -> str:
    path = place / "dataset" / ds.MANIFEST_NAME
    shutil.move(path, place / "outside" / ds.MANIFEST_NAME)
    path.symlink_to(place / "outside" / ds.MANIFEST_NAME)
    return ds.MANIFEST_NAME


def drop_rows(place: Path) -> str:
    edit_json(place / "dataset" / ds.MANIFEST_NAME, lambda m: m["files"][2].pop("rows"))
    return "files[2].rows"


MANIFEST_CASES = [
    entry("sha256", None),
    entry("path", 5),
    entry("path", "../../etc/passwd"),
    entry("path", "/etc/passwd"),
    escape(absolute=False),
    escape(absolute=True),
    drop_rows,
    top("files", {"0": []}),
    top("file_count", 10**30),
    top("file_count", True),
    top("first_day", "yesterday"),
    text(
        "infinite-mean",
        lambda t: t.replace('"expected_mean": ', '"expected_mean": 1e999, "x": '),
        "expected_mean",
    ),
    text(
        "5000-digits",
        lambda t: t.replace('"total_rows": ', '"total_rows": 9' + "9" * 5000 + ', "x": '),
        "not valid JSON",
    ),
    text("nested", lambda t: '{"files": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON"),
    text("not-json", lambda t: t[: len(t) // 2], "not valid JSON"),
    manifest_fifo,
    manifest_link,
]


@pytest.mark.parametrize("case", MANIFEST_CASES, ids=lambda case: case.__name__)
@pytest.mark.slow
def test_a_manifest_the_lab_did_not_write_is_refused(case, place: Path) -> None:
    named = case(place)
    argvs = commands(place / "dataset")
    argvs["read_files"] = script("demos/read_files.py", "--data", place / "dataset")
    for argv in argvs.values():
        expect_unchanged(place, argv, ds.MANIFEST_NAME, named)


@not_as_root
def test_an_unreadable_manifest_is_refused(place: Path, restore_modes: Chmod) -> None:
    restore_modes(place / "dataset" / ds.MANIFEST_NAME, 0)
    for argv in commands(place / "dataset").values():
        expect_unchanged(place, argv, ds.MANIFEST_NAME, "chmod u+r")


@pytest.mark.parametrize(
    "bad",
    [
        [],
        "text",
        {"files": []},
        {"a": 1},
        {"format_version": 1, "generator": "g", "seed": 1, "first_day": "2004-13-45"},
    ],
)
def test_the_schema_check_names_what_is_wrong(bad: object) -> None:
    """The one check every reader of a manifest goes through, in-process: no KeyError or
    TypeError gets past it, whatever the JSON holds."""
    assert ds.manifest_problem(bad)


def test_a_valid_manifest_passes_the_schema_check(template: Path) -> None:
    manifest = ds.load_manifest(template / "dataset")
    assert ds.manifest_problem(manifest) is None and manifest["file_count"] == FILES


# --------------------------------------------------------------------------- (C) archive, shards


def archive_info_fifo(place: Path) -> str:
    path = place / "dataset" / ds.ARCHIVE_INFO_NAME
    path.unlink()
    os.mkfifo(path)
    return ds.ARCHIVE_INFO_NAME


def archive_info_types(place: Path) -> str:
    edit_json(
        place / "dataset" / ds.ARCHIVE_INFO_NAME,
        lambda info: info.__setitem__("archive_bytes", "40960"),
        indent=1,
    )
    return "archive_bytes"


def archive_link(place: Path) -> str:
    """data.tar's own bytes outside the dataset: following the link would verify."""
    path = place / "dataset" / ds.ARCHIVE_NAME
    shutil.move(path, place / "outside" / ds.ARCHIVE_NAME)
    path.symlink_to(place / "outside" / ds.ARCHIVE_NAME)
    return ds.ARCHIVE_NAME


@pytest.mark.parametrize("case", [archive_info_fifo, archive_info_types, archive_link])
@pytest.mark.slow
def test_an_archive_the_lab_must_not_read_is_refused(case, place: Path) -> None:
    named = case(place)
    d = place / "dataset"
    for argv in (
        script("data_generators/create_archive.py", "--data", d),
        script("data_generators/generate_data.py", "--data", d, "--verify"),
        script("demos/read_archive.py", "--data", d, "--verify"),
    ):
        expect_unchanged(place, argv, named)


def shard_name_out(place: Path) -> str:
    edit_json(
        place / "dataset" / "shards" / "shards.json",
        lambda index: index["shards"][1].__setitem__("name", "../../outside/thesis.tex"),
        indent=1,
    )
    return "shards[1].name"


def shard_link(place: Path) -> str:
    shard = place / "dataset" / "shards" / "shard-000001.tar"
    shutil.move(shard, place / "outside" / shard.name)
    shard.symlink_to(place / "outside" / shard.name)
    return shard.name


def shard_fifo(place: Path) -> str:
    shard = place / "dataset" / "shards" / "shard-000001.tar"
    shard.unlink()
    os.mkfifo(shard)
    return shard.name


@pytest.mark.parametrize("case", [shard_name_out, shard_link, shard_fifo])
@pytest.mark.slow
def test_shards_the_lab_must_not_read_are_refused(case, place: Path) -> None:
    named = case(place)
    d = place / "dataset"
    for argv in (
        script("data_generators/make_shards.py", "--data", d, "--samples-per-shard", 10),
        script("data_generators/make_shards.py", "--data", d, "--verify"),
        script("demos/read_samples.py", "--source", "shards", "--data", d),
    ):
        expect_unchanged(place, argv, named)


def image_key_out(place: Path) -> str:
    edit_json(
        place / "images" / "manifest.json",
        lambda m: m["samples"][2].__setitem__("key", "../../outside/thesis"),
    )
    return "samples[2].key"


def image_label_null(place: Path) -> str:
    edit_json(
        place / "images" / "manifest.json", lambda m: m["samples"][2].__setitem__("label", None)
    )
    return "samples[2].label"


def image_fifo(place: Path) -> str:
    sample = place / "images" / "files" / "000002.bin"
    sample.unlink()
    os.mkfifo(sample)
    return sample.name


@pytest.mark.parametrize("case", [image_key_out, image_label_null, image_fifo])
@pytest.mark.slow
def test_images_the_lab_must_not_read_are_refused(case, place: Path) -> None:
    named = case(place)
    images = place / "images"
    for argv in (
        script(
            "data_generators/make_images.py",
            "--data",
            images,
            "--count",
            4,
            "--sample-kb",
            100,
            "--shard-mb",
            0.5,
        ),
        script("data_generators/make_images.py", "--data", images, "--verify"),
        script("demos/read_samples.py", "--source", "files", "--data", images),
    ):
        expect_unchanged(place, argv, named)


# --------------------------------------------------------------------------- (A) not the lab's


def generate(d: Path, seed: int = 1) -> list[str]:
    return script(
        "data_generators/generate_data.py", "--data", d, "--files", FILES, "--quiet", "--seed", seed
    )


@pytest.mark.parametrize(
    "name",
    [
        ds.MANIFEST_NAME,
        ds.ARCHIVE_NAME,
        ds.ARCHIVE_INFO_NAME,
        ".data.partial",
        "manifest.json.partial",
        ds.MARKER_NAME,
    ],
)
@pytest.mark.slow
def test_generate_refuses_a_file_it_did_not_write(name: str, tmp_path: Path) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / name).write_text("the user's own\n")
    (d / "notes.txt").write_text("mine too\n")
    expect_unchanged(tmp_path, generate(d), name)


def test_generate_refuses_a_copy_of_an_unfinished_dataset(place: Path) -> None:
    """cp -r copies the marker too, but a copy is another folder: its marker proves nothing."""
    (place / "dataset" / ds.MANIFEST_NAME).unlink()  # as if its generation had been cut short
    expect_unchanged(place, generate(place / "dataset"), "data")


def test_a_hand_made_or_linked_marker_does_not_count(tmp_path: Path) -> None:
    lab = tmp_path / "lab-dataset"
    assert run(generate(lab)).returncode == 0 and has_marker(lab, ds.MARKER_NAME)
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / ds.MARKER_NAME).write_text((lab / ds.MARKER_NAME).read_text())  # same text
    (hand / ds.ARCHIVE_NAME).write_text("the user's tar\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ds.MARKER_NAME).symlink_to(lab / ds.MARKER_NAME)
    (linked / ds.MANIFEST_NAME).write_text("the user's manifest\n")
    for d, name in ((hand, ds.ARCHIVE_NAME), (linked, ds.MANIFEST_NAME)):
        assert not has_marker(d, ds.MARKER_NAME)
        expect_unchanged(tmp_path, generate(d), name)


def test_a_verified_copy_or_the_labs_own_folder_may_be_rebuilt(place: Path) -> None:
    d = place / "dataset"
    assert not has_marker(d, ds.MARKER_NAME)  # a copy: its marker names the template
    assert run(generate(d, seed=2)).returncode == 0  # it verified, so it is the lab's
    assert has_marker(d, ds.MARKER_NAME) and ds.load_manifest(d)["seed"] == 2
    (d / ds.MANIFEST_NAME).unlink()  # cut short: only the marker says whose data/ is
    proc = run(generate(d, seed=3))
    assert proc.returncode == 0, proc.stderr
    assert ds.verify_dataset(d).ok


@pytest.mark.parametrize("name", ["manifest.json", "manifest.json.partial", "files", "shards"])
def test_make_images_refuses_what_it_did_not_write(name: str, tmp_path: Path) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    if name in ("files", "shards"):
        (d / name).mkdir()
        (d / name / "photo.bin").write_text("the user's own\n")
    else:
        (d / name).write_text("the user's own\n")
    expect_unchanged(
        tmp_path,
        script(
            "data_generators/make_images.py",
            "--data",
            d,
            "--count",
            4,
            "--sample-kb",
            100,
            "--shard-mb",
            0.5,
        ),
        name,
    )


@pytest.mark.parametrize(
    "name", ["shards.json", ".shard-000000.tar.partial", "shard-000003.tar", ".iolab-shards"]
)
def test_make_shards_refuses_what_it_did_not_write(name: str, place: Path) -> None:
    out = place / "mine"
    out.mkdir()
    (out / name).write_text("the user's own\n")
    expect_unchanged(
        place,
        script("data_generators/make_shards.py", "--data", place / "dataset", "--out", out),
        name,
    )


def test_create_archive_never_writes_through_a_link(place: Path) -> None:
    d = place / "dataset"
    for name in (ds.ARCHIVE_NAME, ds.ARCHIVE_INFO_NAME):
        (d / name).unlink()
    thesis = place / "outside" / "thesis.tex"
    (d / (ds.ARCHIVE_NAME + ".partial")).symlink_to(thesis)  # planted where the tar is written
    proc = run(script("data_generators/create_archive.py", "--data", d))
    assert proc.returncode == 0, proc.stderr
    assert thesis.read_text() == "the user's own work\n" and not ds.verify_archive(d)


# --------------------------------------------------------------------------- (B) the writer lock


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_lock_that_cannot_be_written_leaves_nothing(
    code: int, tmp_path: Path, monkeypatch
) -> None:
    def fail(fd: int, data: bytes) -> int:
        raise OSError(code, os.strerror(code))

    with monkeypatch.context() as patch:
        patch.setattr(os, "write", fail)
        with pytest.raises(LabError) as caught, wl.writer_lock(tmp_path):
            pass
    assert len(str(caught.value).splitlines()) == 1 and os.strerror(code) in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_at_the_lock_is_one_sentence(tmp_path: Path) -> None:
    """The generator as a learner runs it, with the lock's write failing as on a full disk."""
    d = tmp_path / "dataset"
    d.mkdir()
    path = str(ROOT / "data_generators" / "generate_data.py")
    code = (
        "import errno, os, runpy, sys\n"
        "real = os.write\n"
        "def write(fd, data):\n"
        f"    if os.readlink(f'/proc/self/fd/{{fd}}').endswith({ds.LOCK_NAME!r}):\n"
        "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "    return real(fd, data)\n"
        "os.write = write\n"
        f"sys.argv = [{path!r}, '--data', {str(d)!r}, '--files', '{FILES}', '--quiet']\n"
        f"runpy.run_path({path!r}, run_name='__main__')\n"
    )
    proc = run([PY, "-c", code])
    assert_refused(proc, ds.LOCK_NAME, os.strerror(errno.ENOSPC))
    assert list(d.iterdir()) == []


@pytest.mark.parametrize("content", [b"", b"\xff\xfe not a holder line", b"1 2"])
@pytest.mark.slow
def test_an_empty_or_unreadable_lock_left_by_a_crash(
    content: bytes, tmp_path: Path, restore_modes: Chmod
) -> None:
    d = tmp_path / "dataset"
    d.mkdir()
    lock = d / ds.LOCK_NAME
    lock.write_bytes(content)
    restore_modes(lock, 0)  # unreadable for a user (root reads it anyway)
    proc = run(generate(d))
    assert_refused(proc, "another run is writing")  # a run may be between create and write
    past = time.time() - wl.STALE_EMPTY_LOCK_SECONDS - 5
    os.utime(lock, (past, past))
    proc = run(generate(d))
    assert proc.returncode == 0, proc.stderr
    assert not lock.exists() and ds.verify_dataset(d).ok


def test_the_lock_is_private_and_never_a_link(tmp_path: Path) -> None:
    with wl.writer_lock(tmp_path):
        assert stat.S_IMODE((tmp_path / ds.LOCK_NAME).lstat().st_mode) == wl.LOCK_MODE
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("mine\n")
    (tmp_path / ds.LOCK_NAME).symlink_to(thesis)
    with pytest.raises(LabError, match="symbolic link"), wl.writer_lock(tmp_path):
        pass
    assert thesis.read_text() == "mine\n" and (tmp_path / ds.LOCK_NAME).is_symlink()


# --------------------------------------------------------------------------- (D) numeric options


@pytest.mark.parametrize(
    "argv",
    [
        ["data_generators/generate_data.py", "--files", "0"],
        ["data_generators/generate_data.py", "--files", "100001"],
        ["data_generators/generate_data.py", "--files", "1e9"],
        ["data_generators/generate_data.py", "--seed", "-1"],
        ["data_generators/generate_data.py", "--seed", str(2**32)],
        ["data_generators/make_images.py", "--seed", "-1"],
        ["data_generators/make_images.py", "--count", "0"],
        ["data_generators/make_images.py", "--shard-mb", "nan"],
        ["data_generators/make_shards.py", "--samples-per-shard", "0"],
        ["data_generators/make_shards.py", "--samples-per-shard", str(10**30)],
        ["data_generators/make_shards.py", "--shard-size-mb", "inf"],
    ],
    ids=lambda argv: "-".join(a.strip("-") for a in argv[1:]) + f"-{Path(argv[0]).stem}",
)
@pytest.mark.slow
def test_numbers_out_of_range_are_refused_before_any_work(argv: list[str], tmp_path: Path) -> None:
    d = tmp_path / "new"
    assert_refused(run(script(argv[0], "--data", d, *argv[1:])), argv[1])
    assert not d.exists()
