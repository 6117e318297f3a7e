"""Your storage: measure every place the lab finds, briefly and gently, and say where things go.

A learner at the end of the lab wants to know, on *this* cluster, where to put an
environment, a dataset, checkpoints and temporary files. This module measures each place
that iolab.storage.locations discovers (the workspace, $HOME, $TMPDIR or /tmp, /dev/shm,
$SCRATCH, $WRKDIR, project and node-local areas) plus, where it can be made, the lab's
loopback sshfs network mount, with the lab's own measuring functions:

- small files (4 KiB): written with an fsync each and read cold (evicted first) by the
  file-size sweep (iolab.storage.sweep), read warm by mdtest-lite's read phase
  (iolab.storage.mdrates), which also gives the create and stat rates;
- streaming: one file of up to 64 MiB written with an fsync and read back cold (the sweep);
- import time of a generated package of small modules, cold and warm
  (iolab.storage.perception.time_import_synthetic);
- free space and inodes (statvfs), the file-system type and kind, the quota where
  `lfs quota` or `quota` answers (else "n/a").

It is login-safe: a time budget (default 180 s in all) is shared among the places, the test
sizes follow from each place's share, a step that would start after a place's share is used
is skipped ("not measured: time budget"), and no place holds more than `mib` MiB and `files`
files at a time (within iolab.core.budget's LIMITS unless the budget is lifted). Every test
works in the place's marked per-user directory (iolab-$USER, or <workspace>/loc) inside a
fresh run directory that it removes; the per-user directory, the sshfs mount and any
workspace entry the run made are removed again at the end, also on an error or Ctrl-C.

The result is a JSON-ready dict; iolab.storage.advice_rules turns it into advice.
"""

from __future__ import annotations

import datetime
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import SupportsFloat

import pandas as pd

from iolab.core.budget import check, lifted
from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir, remove_tree, scratch_dir
from iolab.core.markers import remove_if_only_marked
from iolab.core.storage_areas import STORAGE_AREAS
from iolab.core.wording import counted
from iolab.core.workspace import WorkspaceEntry, public_text, workdir
from iolab.measure.context import machine_context, machine_label, mount_for
from iolab.storage.advice_rules import advise
from iolab.storage.advise_options import (
    DEFAULT_BUDGET_S,
    DEFAULT_FILES,
    DEFAULT_MIB,
    MIN_FILES,
    MIN_MIB,
)
from iolab.storage.locations import Location, discover_locations, private_scratch, quota_text

MIB = 1024**2
MAX_BUDGET_S = 3600.0
SMALL_FILE_BYTES = 4096
#: Sizes follow each place's share of the budget: files and MiB per second of share.
FILES_PER_SHARE_S = 40
MIB_PER_SHARE_S = 2
IMPORT_SUBPACKAGES = 10
#: Every figure the rules rank by is the median of this many runs, and its spread (the
#: largest minus the smallest run) is kept beside it: a difference between two places that
#: is within that spread was not measured (advice_rules).
REPEATS = 3  #: The sshfs place's name; it is measured only where netmount can mount.
SSHFS = "sshfs"
#: Places whose data does not outlive a job or a reboot (node-local and per-job areas).
TEMPORARY_PLACES = frozenset(area.name for area in STORAGE_AREAS if area.temporary)
#: Every key of a place in the result, in order; a value not measured is None.
PLACE_FIELDS = (
    "name",
    "path",
    "fs_type",
    "kind",
    "networked",
    "role",
    "size_bytes",
    "free_bytes",
    "used_pct",
    "inodes_total",
    "free_inodes",
    "inodes_used_pct",
    "quota",
    "small_file_bytes",
    "small_files",
    "small_write_files_per_s",
    "small_read_cold_files_per_s",
    "small_read_warm_files_per_s",
    "small_read_cold_resident_pct",
    "create_ops_per_s",
    "stat_ops_per_s",
    "stream_MiB",
    "stream_write_MiB_per_s",
    "stream_read_MiB_per_s",
    "stream_read_resident_pct",
    "import_modules",
    "import_cold_s",
    "import_warm_s",
    "repeats",
    "small_read_cold_spread_files_per_s",
    "stream_write_spread_MiB_per_s",
    "import_cold_spread_s",
    "elapsed_s",
    "notes",
    "device",
    "same_as",
)
#: What a place on the same file system as an earlier one takes from it (measured once).
MEASURED_FIELDS = tuple(
    f
    for f in PLACE_FIELDS
    if f
    not in ("name", "path", "kind", "networked", "role", "notes", "device", "same_as", "elapsed_s")
)
#: Columns of the table, units in their names.
TABLE_COLUMNS = {
    "name": "place",
    "fs_type": "fs_type",
    "kind": "kind",
    "role": "role",
    "free_bytes": "free_GB",
    "used_pct": "used_pct",
    "free_inodes": "free_inodes",
    "inodes_used_pct": "inodes_used_pct",
    "quota": "quota",
    "small_read_cold_files_per_s": "small_read_cold_files_per_s",
    "small_read_warm_files_per_s": "small_read_warm_files_per_s",
    "stream_write_MiB_per_s": "stream_write_MiB_per_s",
    "stream_read_MiB_per_s": "stream_read_MiB_per_s",
    "create_ops_per_s": "create_ops_per_s",
    "stat_ops_per_s": "stat_ops_per_s",
    "import_cold_s": "import_cold_s",
    "import_warm_s": "import_warm_s",
}


@dataclass(frozen=True)
class Plan:
    """What a run will do: the places, the time budget and the sizes each place gets."""

    places: tuple[str, ...]
    budget_s: float
    mib: int
    files: int
    small_files: int
    stream_mib: int
    import_modules: int
    sshfs_note: str = ""

    @property
    def share_s(self) -> float:
        return self.budget_s / max(1, len(self.places))

    def text(self) -> str:
        """The bound printed before anything is measured."""
        lines = [
            f"advise: at most about {self.budget_s:.0f} s in all for "
            f"{counted(len(self.places), 'place')} "
            f"({', '.join(self.places)}), about {self.share_s:.0f} s each; a test that would "
            "start later is skipped",
            f"per place at most {self.mib} MiB and {self.files} files at a time: "
            f"{self.small_files} files of {SMALL_FILE_BYTES // 1024} KiB, one file of "
            f"{self.stream_mib} MiB, a package of {self.import_modules} modules; everything "
            "is deleted before the next test and at the end",
        ]
        if self.sshfs_note:
            lines.append(self.sshfs_note)
        return "\n".join(lines)


def budget_seconds(text: str | float) -> float:
    """--budget-s as seconds: a number in (0, MAX_BUDGET_S]; else one sentence."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise LabError(
            f"--budget-s must be a number of seconds, not {text!r}; e.g. --budget-s 180"
        ) from None
    if not 0 < value <= MAX_BUDGET_S or math.isnan(value):
        raise LabError(
            f"--budget-s must be above 0 and at most {MAX_BUDGET_S:.0f} s, not "
            f"{text}; e.g. --budget-s 180"
        )
    return value


def _power_of_two_at_most(value: int) -> int:
    return 1 << (max(1, value).bit_length() - 1)


def make_plan(
    places: Sequence[str],
    budget_s: float = DEFAULT_BUDGET_S,
    mib: int = DEFAULT_MIB,
    files: int = DEFAULT_FILES,
    *,
    compute_node: bool | None = None,
    sshfs_note: str = "",
) -> Plan:
    """The sizes for `places` within `budget_s`, checked against the login-node budget."""
    if mib < MIN_MIB or files < MIN_FILES:
        raise LabError(
            f"advise needs at least {MIN_MIB} MiB and {MIN_FILES} files per place; "
            "pass larger --mib and --files"
        )
    check(
        f"advise's tests in one place ({mib} MiB, {files} files)",
        data_mib=mib,
        files=files,
        fix="pass smaller --mib and --files",
        compute_node=compute_node,
    )
    if not places:
        raise LabError(
            "there is no place to measure; check --places against `python -m iolab locations`"
        )
    share = budget_s / len(places)
    small = int(min(files, max(MIN_FILES, share * FILES_PER_SHARE_S)))
    stream = _power_of_two_at_most(int(min(mib, max(MIN_MIB, share * MIB_PER_SHARE_S))))
    modules = max(10, small // 2 - IMPORT_SUBPACKAGES - 1)
    return Plan(tuple(places), budget_s, mib, files, small, stream, modules, sshfs_note)


# --------------------------------------------------------------------------- one place


def _role(name: str, kind: str) -> str:
    if kind == "memory":
        return "memory"
    return "temporary" if name in TEMPORARY_PLACES else "persistent"


def _space(directory: Path) -> dict:
    """Size, free bytes and inodes, and the used shares as df computes them."""
    st = os.statvfs(directory)
    size = st.f_blocks * st.f_frsize
    used = size - st.f_bfree * st.f_frsize
    avail = st.f_bavail * st.f_frsize
    inodes = st.f_files or None
    return {
        "size_bytes": size,
        "free_bytes": avail,
        "used_pct": round(100 * used / (used + avail), 1) if used + avail else None,
        "inodes_total": inodes,
        "free_inodes": st.f_favail if inodes else None,
        "inodes_used_pct": round(100 * (st.f_files - st.f_ffree) / st.f_files, 1)
        if inodes
        else None,
    }


def _sweep(directory: Path, plan: Plan, compute_node: bool | None) -> dict:
    """Small files and one streaming file: written with fsync, read back cold, REPEATS times;
    each figure is the median of the runs, and the ranked ones keep their spread."""
    from iolab.storage.sweep import plan as sweep_plan
    from iolab.storage.sweep import run_sweep

    stream = plan.stream_mib * MIB
    points = pd.concat(
        [
            sweep_plan(
                SMALL_FILE_BYTES,
                SMALL_FILE_BYTES,
                plan.small_files,
                plan.small_files * SMALL_FILE_BYTES,
                compute_node=compute_node,
            ),
            sweep_plan(stream, stream, 1, stream, compute_node=compute_node),
        ],
        ignore_index=True,
    )
    rows = run_sweep(directory, points, repeats=REPEATS, progress=False)

    def runs(size: int, direction: str, column: str) -> pd.Series:
        chosen = rows[(rows["file_bytes"] == size) & (rows["direction"] == direction)]
        return chosen[column].astype(float)

    def resident(size: int) -> float | None:  # a read is cold only if every run started so
        return _maybe(runs(size, "read", "resident_before_pct").max())

    small_read = runs(SMALL_FILE_BYTES, "read", "files_per_s")
    stream_write = runs(stream, "write", "MiB_per_s")
    return {
        "repeats": REPEATS,
        "small_file_bytes": SMALL_FILE_BYTES,
        "small_files": plan.small_files,
        "small_write_files_per_s": float(runs(SMALL_FILE_BYTES, "write", "files_per_s").median()),
        "small_read_cold_files_per_s": float(small_read.median()),
        "small_read_cold_spread_files_per_s": _spread(small_read),
        "small_read_cold_resident_pct": resident(SMALL_FILE_BYTES),
        "stream_MiB": plan.stream_mib,
        "stream_write_MiB_per_s": float(stream_write.median()),
        "stream_write_spread_MiB_per_s": _spread(stream_write),
        "stream_read_MiB_per_s": float(runs(stream, "read", "MiB_per_s").median()),
        "stream_read_resident_pct": resident(stream),
    }


def _spread(runs: pd.Series) -> float:
    """The largest run minus the smallest: how far apart repeated runs of one place land."""
    return float(runs.max() - runs.min())


def _maybe(value: SupportsFloat | None) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _metadata(directory: Path, plan: Plan, compute_node: bool | None) -> dict:
    """mdtest-lite, one process, 4 KiB files: create, stat and a warm read of each."""
    from iolab.storage.mdrates import run_mdtest

    table = run_mdtest(
        directory,
        plan.small_files,
        1,
        False,
        SMALL_FILE_BYTES,
        1,
        progress=False,
        compute_node=compute_node,
    ).set_index("Operation")
    return {
        "create_ops_per_s": float(table.loc["File creation", "Mean (ops/s)"]),
        "stat_ops_per_s": float(table.loc["File stat", "Mean (ops/s)"]),
        "small_read_warm_files_per_s": float(table.loc["File read", "Mean (ops/s)"]),
    }


def _imports(directory: Path, plan: Plan, compute_node: bool | None) -> dict:
    """`python -c "import synthpkg"` of a generated package in the place, cold and warm."""
    from iolab.storage.perception import PerceptionSizes, time_import_synthetic

    sizes = PerceptionSizes(
        synthetic_modules=plan.import_modules, synthetic_subpackages=IMPORT_SUBPACKAGES
    )
    frame = time_import_synthetic(directory, REPEATS, sizes).set_index("cache_state")
    return {
        "import_modules": plan.import_modules,
        "import_cold_s": float(frame.loc["cold", "wall_median_s"]),
        "import_cold_spread_s": float(
            frame.loc["cold", "wall_max_s"] - frame.loc["cold", "wall_min_s"]
        ),
        "import_warm_s": float(frame.loc["warm", "wall_median_s"]),
    }


#: The tests of a place, most useful first (a place whose share runs out keeps the first).
STEPS: tuple[tuple[str, Callable[[Path, Plan, bool | None], dict]], ...] = (
    ("small files and streaming", _sweep),
    ("metadata", _metadata),
    ("import", _imports),
)


def _empty_place(name: str, path: str, fs_type: str, kind: str, networked: bool) -> dict:
    place = dict.fromkeys(PLACE_FIELDS)
    place.update(
        name=name,
        path=path,
        fs_type=fs_type,
        kind=kind,
        networked=networked,
        role=_role(name, kind),
        notes=[],
    )
    return place


def measure_directory(
    place: dict, directory: Path, plan: Plan, deadline: float, compute_node: bool | None = None
) -> dict:
    """Fill `place` with the space, quota and every step that starts before `deadline`.

    A step that fails with a LabError (a full file system, a missing tool) or an OSError (an
    operation the file system refuses) is noted and the next one runs; Ctrl-C goes through,
    after each step's own cleanup.
    """
    start = time.monotonic()
    place.update(_space(directory))
    mount = mount_for(directory)
    place["quota"] = quota_text(place["fs_type"], mount.mount_point)
    for label, step in STEPS:
        if time.monotonic() >= deadline:
            place["notes"].append(f"{label}: not measured (time budget used up)")
            continue
        try:
            place.update(step(directory, plan, compute_node))
        except LabError as err:
            place["notes"].append(f"{label}: not measured ({public_text(str(err))})")
        except OSError as err:  # a file system that refuses an operation: said, not a traceback
            place["notes"].append(f"{label}: not measured ({err.strerror or type(err).__name__})")
    if place["kind"] == "memory":
        place["notes"].append("memory file system: nothing can be evicted, cold equals warm")
    place["elapsed_s"] = round(time.monotonic() - start, 2)
    return place


def progress_line(place: dict) -> str:
    """One line per measured place for stderr."""
    if place.get("same_as"):
        return f"advise: {place['name']}: {place['notes'][-1]}"
    if place.get("elapsed_s") is None:
        return f"advise: {place['name']}: {'; '.join(place['notes']) or 'not measured'}"

    def show(key: str, unit: str, digits: int = 0) -> str:
        value = place.get(key)
        return "n/a" if value is None else f"{value:,.{digits}f} {unit}"

    return (
        f"advise: {place['name']} ({place['fs_type']}, {place['kind']}) in "
        f"{place['elapsed_s']:.0f} s: small files "
        f"{show('small_read_cold_files_per_s', 'files/s')}"
        f" cold, streaming {show('stream_write_MiB_per_s', 'MiB/s')} write / "
        f"{show('stream_read_MiB_per_s', 'MiB/s')} read, import "
        f"{show('import_cold_s', 's', 2)} cold"
    )


# --------------------------------------------------------------------------- all places


def candidate_places(names: Sequence[str] | None = None) -> tuple[list[Location], bool]:
    """The discovered locations to measure, and whether the sshfs place is wanted.

    `names` chooses among the discovered names and "sshfs"; an unknown name is one sentence
    that lists the known ones.
    """
    locations = discover_locations(probe=False)
    known = [location.name for location in locations] + [SSHFS]
    if names is None:
        return locations, True
    unknown = [name for name in names if name not in known]
    if unknown:
        raise LabError(
            f"there is no place called {unknown[0]!r} here; choose from {', '.join(known)}"
        )
    return [location for location in locations if location.name in names], SSHFS in names


def _sshfs_problem() -> str | None:
    from iolab.storage.netmount import sshfs_problem

    return sshfs_problem()


def _workspace_entries() -> list[Path]:
    """The workspace and the entries a run may create in it, innermost first."""
    return [WorkspaceEntry.TMP.path(), WorkspaceEntry.MNT.path(), workdir()]


def _remove_made_empty(paths: Sequence[Path]) -> None:
    """Remove each directory the run made if it holds nothing but the lab's marker."""
    for path in paths:
        remove_if_only_marked(path)


def measure_places(
    names: Sequence[str] | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    mib: int = DEFAULT_MIB,
    files: int = DEFAULT_FILES,
    *,
    compute_node: bool | None = None,
    announce: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Measure every place (or those in `names`) and return the JSON-ready result with advice.

    `announce` receives the plan's text before anything is written, `progress` one line per
    place when it is done. The result: machine and date, the plan, one dict per place (keys
    PLACE_FIELDS), the places skipped with the reason, and the advice.
    """
    started = time.monotonic()
    existed = {path: path.exists() for path in _workspace_entries()}
    try:
        return _measure_all(names, started, budget_s, mib, files, compute_node, announce, progress)
    finally:
        _remove_made_empty([path for path, was in existed.items() if not was])


def _measure_all(
    names: Sequence[str] | None,
    started: float,
    budget_s: float,
    mib: int,
    files: int,
    compute_node: bool | None,
    announce: Callable[[str], None] | None,
    progress: Callable[[str], None] | None,
) -> dict:
    """measure_places without the final cleanup of the workspace entries it made."""
    ensure_writable_dir(workdir())  # discovery lists the workspace only once it exists
    locations, want_sshfs = candidate_places(names)
    skipped = []
    sshfs_note = ""
    if want_sshfs:
        problem = _sshfs_problem()
        if problem is None:
            sshfs_note = (
                "sshfs: a loopback network mount of a scratch directory in the "
                "workspace, unmounted at the end"
            )
        else:
            want_sshfs = False
            sshfs_note = f"sshfs: skipped, {problem}"
            skipped.append({"name": SSHFS, "reason": problem})
    order = [location.name for location in locations] + ([SSHFS] if want_sshfs else [])
    plan = make_plan(order, budget_s, mib, files, compute_node=compute_node, sshfs_note=sshfs_note)
    if announce is not None:
        announce(plan.text())
    places: list[dict] = []
    for index, location in enumerate(locations):
        twin = same_file_system(location.base, places)
        if twin is not None:  # one file system is one place: measured once, never ranked
            places.append(_same_as(location, twin))
        else:
            deadline = _deadline(started, plan, index)
            places.append(_measure_location(location, plan, deadline, compute_node, skipped))
            places[-1]["device"] = device_of(location.base)
        if progress is not None:
            progress(progress_line(places[-1]))
    # mounting takes seconds: not worth it with less than half a share left
    late = _deadline(started, plan, len(locations)) - plan.share_s / 2
    if want_sshfs and time.monotonic() >= late:
        skipped.append({"name": SSHFS, "reason": "the time budget was used up before it"})
    elif want_sshfs:
        place = _measure_sshfs(
            plan, _deadline(started, plan, len(locations)), compute_node, skipped
        )
        if place is not None:
            places.append(place)
            if progress is not None:
                progress(progress_line(place))
    result = {
        "schema": "iolab.advise/1",
        "machine": machine_label(machine_context(tools=())),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "plan": {
            "places": list(plan.places),
            "budget_s": plan.budget_s,
            "mib": plan.mib,
            "files": plan.files,
            "small_files": plan.small_files,
            "small_file_bytes": SMALL_FILE_BYTES,
            "stream_MiB": plan.stream_mib,
            "import_modules": plan.import_modules,
            "budget_lifted": lifted(compute_node),
        },
        "places": places,
        "skipped": skipped,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    result["advice"] = [advice._asdict() for advice in advise(result)]
    return result


def device_of(path: Path) -> str | None:
    """The device a path lives on ("major:minor"), the identity of its file system here."""
    try:
        device = os.stat(path).st_dev
    except OSError:
        return None
    return f"{os.major(device)}:{os.minor(device)}"


def same_file_system(path: Path, places: Sequence[dict]) -> dict | None:
    """The measured place already on the device of `path`, if any."""
    device = device_of(path)
    return next(
        (p for p in places if device and p.get("device") == device and not p.get("same_as")), None
    )


def _same_as(location: Location, twin: dict) -> dict:
    """A place on the file system of `twin`: its own name, path and role, twin's numbers."""
    place = _empty_place(
        location.name,
        public_text(location.base),
        location.fs_type,
        location.kind,
        location.networked,
    )
    place.update(
        {field: twin.get(field) for field in MEASURED_FIELDS},
        device=twin["device"],
        same_as=twin["name"],
        elapsed_s=0.0,
    )
    place["notes"].append(
        f"the same file system as {twin['name']} (device {twin['device']}): "
        "measured once, so the two are never ranked against each other"
    )
    return place


def _deadline(started: float, plan: Plan, index: int) -> float:
    """When place `index` must stop starting tests: its share after the previous ones'."""
    return started + plan.share_s * (index + 1)


def _measure_location(
    location: Location, plan: Plan, deadline: float, compute_node: bool | None, skipped: list[dict]
) -> dict:
    """One discovered place, in a private scratch folder of its own (removed afterwards)."""
    place = _empty_place(
        location.name,
        public_text(location.base),
        location.fs_type,
        location.kind,
        location.networked,
    )
    try:
        with private_scratch(location, "advise") as directory:
            return measure_directory(place, directory, plan, deadline, compute_node)
    except LabError as err:  # the place cannot be written (measure_directory notes the rest)
        place["notes"].append(f"not measured ({public_text(str(err))})")
        skipped.append({"name": location.name, "reason": public_text(str(err))})
        place.update(_space(location.base))
        return place


def _measure_sshfs(
    plan: Plan, deadline: float, compute_node: bool | None, skipped: list[dict]
) -> dict | None:
    """A scratch directory of the workspace mounted over loopback sshfs, measured there."""
    from iolab.storage.netmount import FS_TYPE, loopback_sshfs

    with ExitStack() as stack:
        export = scratch_dir("advise-sshfs")
        stack.callback(remove_tree, export)
        try:
            mount = stack.enter_context(loopback_sshfs(export, name="advise"))
        except LabError as err:
            skipped.append({"name": SSHFS, "reason": public_text(str(err))})
            return None
        place = _empty_place(
            SSHFS, "$IOLAB_WORKDIR/mnt/advise-... (loopback sshfs)", FS_TYPE, "network", True
        )
        return measure_directory(place, mount.mount_point, plan, deadline, compute_node)


# --------------------------------------------------------------------------- showing it


def places_frame(result: dict) -> pd.DataFrame:
    """One row per place, the measured values with units in the column names."""
    frame = pd.DataFrame(
        [
            {column: place.get(key) for key, column in TABLE_COLUMNS.items()}
            for place in result["places"]
        ],
        columns=list(TABLE_COLUMNS.values()),
    )
    frame["free_GB"] = frame["free_GB"].map(
        lambda b: None if b is None or pd.isna(b) else round(b / 1e9, 1)
    )
    return frame


def advice_frame(result: dict) -> pd.DataFrame:
    """The advice as a table: topic, place, recommendation, reason."""
    return pd.DataFrame(
        result.get("advice") or [], columns=["topic", "place", "recommendation", "reason"]
    )


def text_report(result: dict) -> str:
    """The table, the notes per place, the skipped places and the advice, for a terminal."""
    from iolab.core.tables import to_markdown

    frame = places_frame(result).drop(columns=["quota"])
    lines = [to_markdown(frame), ""]
    quotas = [
        f"- {p['name']}: quota {p['quota']}"
        for p in result["places"]
        if p.get("quota") not in (None, "n/a")
    ]
    notes = [f"- {p['name']}: {note}" for p in result["places"] for note in p.get("notes", [])]
    notes += [f"- {s['name']}: skipped ({s['reason']})" for s in result.get("skipped", [])]
    if quotas or notes:
        lines += quotas + notes + [""]
    if not quotas:
        lines += ["quota: n/a (neither `lfs quota` nor `quota` answered here)", ""]
    lines.append("Advice:")
    for advice in result.get("advice", []):
        lines.append(f"- {advice['topic']}: {advice['recommendation']}")
        lines.append(f"    because {advice['reason']}")
    if not result.get("advice"):
        lines.append("- none: too little was measured to compare places")
    lines += [
        "",
        "This is about places, not programs. Why is a job of yours slow on the file "
        "system? `python -m iolab diagnose -- CMD` (or a Darshan log of the job) ranks "
        "what its I/O costs.",
    ]
    return "\n".join(lines)


def eprint(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
