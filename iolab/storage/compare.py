"""The same dataset in several places, read by every reader, cold and warm.

A claim like "many small files are slow" depends on where the files are: on a local disk
with a warm page cache they are served from RAM, on a network file system every open and
stat is a round trip. This module puts a copy of the dataset at each available place (the
workspace on local disk, the RAM disk /dev/shm, and a real network file system: the
workspace mounted over sshfs through a loopback sshd), runs the reader grid, and removes
every copy and mount afterwards.

In a class the dataset is shared and read-only, and the places are compared on a private
subset instead (CLASS_SUBSET_FILES, generated in the learner's workspace and again on the
RAM disk): evicting the shared dataset for a cold run would make it cold for the whole class
(and its residency cannot be seen by a learner), and a whole copy in /dev/shm per learner
would fill the node's memory with dozens of datasets. The subset shows the same ordering.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.builder import build_dataset
from iolab.core.class_folder import CLASS_SUBSET_FILES, active_class
from iolab.core.workspace import WorkspaceEntry, default_dataset_dir
from iolab.measure.context import fs_kind, mount_for


@contextlib.contextmanager
def grid_dataset() -> Iterator[tuple[Path, int | None]]:
    """The dataset the places are compared on, with its file count (None: the default):
    the workspace's own alone; in a class, a private subset removed afterwards."""
    from iolab.core.lab_dirs import remove_tree, scratch_dir

    if active_class() is None:
        local = default_dataset_dir()
        build_dataset(local)
        yield local, None
        return
    folder = scratch_dir("class-subset")
    try:
        subset = folder / WorkspaceEntry.DATASET.dirname
        build_dataset(subset, files=CLASS_SUBSET_FILES)
        print(
            f"in a class: the places hold your own {CLASS_SUBSET_FILES}-file subset, not the "
            "shared dataset (a cold run would evict it for everybody)",
            flush=True,
        )
        yield subset, CLASS_SUBSET_FILES
    finally:
        remove_tree(folder)


@dataclass(frozen=True)
class Site:
    """One place holding a complete copy of the dataset."""

    name: str
    dataset_dir: Path
    fs_type: str
    kind: str


def site_for(name: str, dataset_dir: Path) -> Site:
    """Describe a dataset copy by the file system it sits on."""
    fs_type = mount_for(dataset_dir).fs_type
    return Site(name, dataset_dir, fs_type, fs_kind(fs_type))


@contextlib.contextmanager
def dataset_sites(ram_disk: bool = True, network: bool = True) -> Iterator[list[Site]]:
    """Yield the available sites; copies on the RAM disk and the mount vanish afterwards.

    Sites that cannot be had here (no /dev/shm, no sshfs) are left out; `skipped_sites()`
    says why.
    """
    from iolab.storage.locations import discover_locations, private_scratch
    from iolab.storage.netmount import loopback_sshfs, sshfs_status

    with contextlib.ExitStack() as cleanup:
        local, files = cleanup.enter_context(grid_dataset())
        sites = [site_for("workspace (local disk)", local)]
        shm = [loc for loc in discover_locations(probe=False) if loc.name == "shm"]
        if ram_disk and shm and shm[0].writable:
            # a folder of this run's own: another run of the same user (a second workspace,
            # a rehearsal's simulated learners) may be comparing at the same time
            place = cleanup.enter_context(private_scratch(shm[0], "grid"))
            copy = place / WorkspaceEntry.DATASET.dirname
            build_dataset(copy, files=files)
            sites.append(site_for("/dev/shm (RAM disk)", copy))
        if network and sshfs_status().available:
            mount = cleanup.enter_context(loopback_sshfs(local, name="dataset"))
            sites.append(site_for("sshfs over loopback (network)", mount.mount_point))
        yield sites


def network_reader_grid(
    names: Sequence[str], repeats: int = 3, caches: Sequence[str] = ("cold", "warm")
) -> pd.DataFrame:
    """The reader grid on the workspace's dataset mounted over loopback sshfs, then unmounted."""
    from iolab.storage.netmount import loopback_sshfs

    with grid_dataset() as (local, _), loopback_sshfs(local, name="dataset") as mount:
        site = site_for("sshfs over loopback (network)", mount.mount_point)
        return reader_grid([site], names, repeats, caches)


def skipped_sites(network: bool = True) -> list[str]:
    """Why a site is missing from dataset_sites(network=...) here, one sentence each."""
    from iolab.storage.locations import discover_locations
    from iolab.storage.netmount import sshfs_status

    notes = []
    if not [loc for loc in discover_locations(probe=False) if loc.name == "shm"]:
        notes.append("no /dev/shm on this machine: the RAM-disk site is left out")
    status = sshfs_status()
    if network and not status.available:
        notes.append(f"no network site: {status.reason}")
    return notes


def reader_grid(
    sites: Sequence[Site],
    names: Sequence[str],
    repeats: int = 3,
    caches: Sequence[str] = ("cold", "warm"),
) -> pd.DataFrame:
    """Every reader at every site in every cache state: one tidy row per combination."""
    from iolab.measure.readers import time_readers, timing_frame

    frames = []
    for site in sites:
        for cache in caches:
            frame = timing_frame(
                time_readers(site.dataset_dir, names=names, repeats=repeats, cache=cache)
            )
            frame.insert(0, "site", site.name)
            frame["fs_type"] = site.fs_type
            frames.append(frame)
    grid = pd.concat(frames, ignore_index=True)
    columns = [
        "site",
        "fs_type",
        "reader",
        "cache_state",
        "repeats",
        "wall_median_s",
        "wall_min_s",
        "wall_max_s",
        "in_reader_median_s",
        "resident_before_max_pct",
    ]
    return grid[[c for c in columns if c in grid.columns]]
