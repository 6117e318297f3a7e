"""Tests of iolab.storage.locations on this machine: discovery, de-duplication, O_DIRECT, safe
cleanup."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.core.markers import LOCATION_MARKER
from iolab.core.storage_areas import STORAGE_AREAS
from iolab.measure.context import mount_for
from iolab.storage import locations as locations_module
from iolab.storage.locations import discover_locations, locations_frame, remove_user_dir, user_dir

ROOT = Path(__file__).resolve().parent.parent
SHM = Path("/dev/shm")
#: File systems on which O_DIRECT is known to work with 512- or 4096-byte aligned buffers.
DIRECT_IO_FS = {"ext4", "xfs", "btrfs"}


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Workspace, home and TMPDIR in fresh directories; no cluster variables set."""
    dirs = {name: tmp_path / name for name in ("workspace", "home", "tmp")}
    for path in dirs.values():
        path.mkdir()
    monkeypatch.setenv("IOLAB_WORKDIR", str(dirs["workspace"]))
    monkeypatch.setenv("HOME", str(dirs["home"]))
    monkeypatch.setenv("TMPDIR", str(dirs["tmp"]))
    for area in STORAGE_AREAS:
        if area.variable and area.default is None:
            monkeypatch.delenv(area.variable, raising=False)
    return dirs


def by_name(locations: list) -> dict:
    return {location.name: location for location in locations}


def listing(path: Path) -> list[str]:
    """Every entry below `path`, relative, sorted: what a change in a base would show."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_discovery_finds_the_standard_places_with_their_file_systems(places):
    found = by_name(discover_locations())
    expected = ["workspace", "home", "tmp"] + (["shm"] if SHM.is_dir() else [])
    assert list(found) == expected
    for location in found.values():
        assert location.fs_type == mount_for(location.base).fs_type
        assert location.free_bytes > 0
        assert location.writable
    assert found["workspace"].path == places["workspace"] / "loc"
    assert found["tmp"].path == places["tmp"] / f"iolab-{getpass.getuser()}"


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this machine")
def test_dev_shm_is_memory_and_its_o_direct_result_is_explained(places):
    shm = by_name(discover_locations())["shm"]
    assert (shm.fs_type, shm.kind, shm.networked) == ("tmpfs", "memory", False)
    # tmpfs refused O_DIRECT (EINVAL) before Linux 6.6 and accepts it since; either way the
    # note says what the result means, because tmpfs has no device to go direct to.
    if shm.o_direct:
        assert "RAM" in shm.o_direct_note
    else:
        assert shm.o_direct is False and shm.o_direct_note.startswith("EINVAL")


def test_o_direct_works_on_the_workspace_disk_with_an_alignment(places):
    workspace = by_name(discover_locations())["workspace"]
    if workspace.fs_type not in DIRECT_IO_FS:
        pytest.skip(f"the workspace is on {workspace.fs_type}")
    assert workspace.o_direct is True
    assert workspace.alignment_bytes in (512, 4096)


@pytest.mark.skipif(os.getuid() == 0, reason="root may search any folder")
def test_a_workspace_we_may_not_search_is_listed_as_not_writable(places, tmp_path, monkeypatch):
    """Another user's clone, say: its workspace is theirs (0700), and discovery (the class
    preflight's first step) says it is not ours to write in rather than failing."""
    workspace = tmp_path / "theirs"
    workspace.mkdir(mode=0o000)
    monkeypatch.setenv("IOLAB_WORKDIR", str(workspace))
    try:
        found = by_name(discover_locations(probe=False))
    finally:
        workspace.chmod(0o700)
    assert found["workspace"].writable is False


def test_a_cluster_variable_is_discovered_under_its_lowercased_name(places, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("SCRATCH", str(scratch))
    monkeypatch.setenv("WORK", str(tmp_path / "missing"))
    found = by_name(discover_locations(probe=False))
    assert found["scratch"].base == scratch.resolve()
    assert "work" not in found


def test_a_directory_reached_twice_is_listed_once_under_its_first_name(places, monkeypatch):
    monkeypatch.setenv("TMPDIR", "/tmp")
    monkeypatch.setenv("SCRATCH", str(places["home"]))
    locations = discover_locations(probe=False)
    assert [loc.name for loc in locations if loc.base == Path("/tmp").resolve()] == ["tmp"]
    assert "scratch" not in by_name(locations)


def test_extra_directories_appear_named_by_basename_or_by_mapping(places, tmp_path):
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    fast.mkdir()
    slow.mkdir()
    assert "extra:fast" in by_name(discover_locations([fast], probe=False))
    named = by_name(discover_locations({"nvme": fast, "home again": places["home"]}, probe=False))
    assert named["nvme"].base == fast.resolve()
    assert "home again" not in named  # the home directory keeps its first name


@pytest.mark.parametrize("make", [lambda p: p.write_text("x"), lambda p: None])
def test_an_extra_path_that_is_not_a_directory_is_one_clear_error(places, tmp_path, make):
    path = tmp_path / "not-a-dir"
    make(path)
    with pytest.raises(LabError, match="pass an existing directory"):
        discover_locations([path], probe=False)


def test_probing_leaves_every_base_as_it_found_it(places):
    (places["tmp"] / "theirs.txt").write_text("keep")
    before = {name: listing(path) for name, path in places.items()}
    discover_locations()
    assert {name: listing(path) for name, path in places.items()} == before


def test_probing_an_existing_user_dir_leaves_only_its_marker(places):
    tmp = by_name(discover_locations(probe=False))["tmp"]
    user_dir(tmp)
    discover_locations()
    assert listing(tmp.path) == [LOCATION_MARKER]


def test_discovery_never_removes_a_user_dir_another_process_made_meanwhile(places, monkeypatch):
    """A notebook may make and fill the per-user directory while `iolab locations` probes:
    the probe works in a folder of its own, so the notebook's files stay."""
    real_probe = locations_module.probe_o_direct

    def probe_while_a_notebook_starts(directory: Path):
        if directory.parent.parent == places["tmp"]:  # the probe of /tmp: the notebook starts now
            tmp = by_name(discover_locations(probe=False))["tmp"]
            (user_dir(tmp) / "notebook-data.bin").write_bytes(b"1" * 10)
        return real_probe(directory)

    monkeypatch.setattr(locations_module, "probe_o_direct", probe_while_a_notebook_starts)
    tmp = by_name(discover_locations())["tmp"]
    assert tmp.o_direct is not None
    assert (tmp.path / "notebook-data.bin").read_bytes() == b"1" * 10
    assert [p.name for p in places["tmp"].iterdir()] == [tmp.path.name]  # no probe folder left


def test_no_probe_writes_nothing(places, tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "not-yet"))
    before = listing(tmp_path)
    found = by_name(discover_locations(probe=False))
    assert "workspace" not in found  # a workspace that does not exist yet is not created
    assert found["tmp"].o_direct is None
    assert listing(tmp_path) == before


def test_user_dir_is_made_marked_and_removed_alone(places):
    (places["tmp"] / "theirs").mkdir()
    tmp = by_name(discover_locations(probe=False))["tmp"]
    path = user_dir(tmp)
    assert path == places["tmp"] / f"iolab-{getpass.getuser()}"
    assert (path / LOCATION_MARKER).is_file()
    (path / "data.bin").write_bytes(b"0" * 10)
    remove_user_dir(tmp)
    assert listing(places["tmp"]) == ["theirs"]


def test_a_directory_without_the_marker_is_left_untouched_for_a_private_one(places, capsys):
    """A name someone else took (or a folder of the user's own) is never entered: the lab
    works in a fresh private folder beside it and says so in one sentence."""
    tmp = by_name(discover_locations(probe=False))["tmp"]
    tmp.path.mkdir()
    (tmp.path / "precious.txt").write_text("mine")
    fresh = user_dir(tmp)
    assert fresh != tmp.path and fresh.parent == tmp.path.parent
    assert fresh.name.startswith(tmp.path.name + "-")
    assert oct(fresh.stat().st_mode & 0o777) == "0o700"
    assert "left it alone and works in" in capsys.readouterr().err
    assert user_dir(tmp) == fresh  # found again, not one more each time
    remove_user_dir(tmp)
    assert not fresh.exists()
    assert listing(tmp.path) == ["precious.txt"]
    assert by_name(discover_locations())["tmp"].o_direct is not None
    assert [p.name for p in places["tmp"].iterdir()] == [
        tmp.path.name
    ]  # the probe's own folder is gone again


def test_a_symlink_in_place_of_the_user_dir_is_never_followed(places, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / LOCATION_MARKER).write_text("")
    (target / "precious.txt").write_text("mine")
    tmp = by_name(discover_locations(probe=False))["tmp"]
    tmp.path.symlink_to(target)
    fresh = user_dir(tmp)
    assert fresh != tmp.path and not fresh.is_symlink()
    remove_user_dir(tmp)
    assert tmp.path.is_symlink() and not fresh.exists()
    assert listing(target) == sorted([LOCATION_MARKER, "precious.txt"])


def test_the_frame_has_units_and_names_no_one(places):
    frame = locations_frame(discover_locations())
    assert {"free_GB", "o_direct_alignment_bytes", "free_inodes", "mount_options"} <= set(frame)
    user = getpass.getuser()
    assert frame.loc[frame.name == "home", "path"].item() == "~/iolab-$USER"
    assert not frame.path.str.contains(f"iolab-{user}", regex=False).any()


@pytest.mark.slow
def test_cli_json_prints_one_array(places, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "iolab", "locations", "--json", "--add", str(extra)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert isinstance(records, list)
    names = [record["name"] for record in records]
    assert names[:3] == ["workspace", "home", "tmp"] and names[-1] == "extra:extra"
    assert all(record["free_bytes"] > 0 for record in records)
