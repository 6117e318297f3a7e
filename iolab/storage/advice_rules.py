"""Plain rules that turn measured places into advice: where things should live on *this* system.

Each rule is a small pure function of one measurement set (the dict that
iolab.storage.advise.measure_places returns, or a recorded one from tests/fixtures/advise/)
and returns one Advice (topic, recommendation, reason with the measured numbers, and the
place it names) or None when it has nothing to say: a rule whose inputs were not measured
anywhere returns None, and a place whose value is missing (None) is left out of the
comparison. The rules, in the order `advise` prints them:

- ``environment``: the persistent place with the fastest cold import of a generated package;
- ``dataset``: the persistent place that reads small files fastest, cold;
- ``packing``: in that place, small-file rate against streaming rate, as seconds per GB;
- ``checkpoints``: the persistent place with the fastest streaming write, and whether to
  write to a local temporary place first and copy;
- ``TMPDIR``: a local, temporary place that is not memory and has room;
- ``nearly full``: places with 80 % or more of their bytes or inodes used.

A place dict has the keys of advise.PLACE_FIELDS; these rules read `name`, `role`
("persistent", "temporary" or "memory"), `kind` ("local", "network", "memory", ...), and the
measured values named in each docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple, TypedDict

from iolab.storage.hygiene import USABLE_FRACTIONS

MIB = 1024**2
GB = 1e9
#: The share of a file system that can be relied on: 80 % (lesson 11; Bekman, "Machine
#: Learning Engineering", chapter Storage, from the experience of IO engineers).
NEARLY_FULL_PCT = 100 * USABLE_FRACTIONS[0][0]
NEARLY_FULL_SOURCE = USABLE_FRACTIONS[0][1]
#: Packing into an archive or shards is worth its trouble from 2x fewer seconds per GB on.
PACK_MIN_RATIO = 2.0
#: Writing to a local place first and copying is worth a second step from 2x faster on.
LOCAL_FIRST_MIN_RATIO = 2.0
#: A dataset is worth copying to a temporary place at job start from 2x faster reads on.
STAGE_MIN_RATIO = 2.0
#: A gain under this share of the best is not worth moving an environment, a dataset or a
#: checkpoint directory for, however steady the runs: places that close are named together.
WORTH_A_MOVE_PCT = 10.0
#: Where a figure's run-to-run spread was not measured (a set built from published
#: figures, or a single run), differences under this share are taken as noise.
ASSUMED_NOISE_PCT = 25.0
#: The measured figures of a place the rules read (keys of advise.PLACE_FIELDS).
Figure = Literal[
    "import_cold_s",
    "import_cold_spread_s",
    "small_file_bytes",
    "small_read_cold_files_per_s",
    "small_read_cold_spread_files_per_s",
    "stream_read_MiB_per_s",
    "stream_write_MiB_per_s",
    "stream_write_spread_MiB_per_s",
    "used_pct",
    "inodes_used_pct",
]
#: The run-to-run spread kept beside each figure the rules rank by (advise.REPEATS runs:
#: the largest minus the smallest, in the figure's unit).
SPREAD_OF: dict[Figure, Figure] = {
    "import_cold_s": "import_cold_spread_s",
    "small_read_cold_files_per_s": "small_read_cold_spread_files_per_s",
    "stream_write_MiB_per_s": "stream_write_spread_MiB_per_s",
}
#: Room a TMPDIR needs (the lab's choice): unpacking an archive, building a conda
#: environment or pip's wheel cache each take several GB of temporary space.
TMPDIR_MIN_FREE_BYTES = 10 * GB


class Place(TypedDict, total=False):
    """The keys of one place (advise.PLACE_FIELDS) that these rules read; a figure that was
    not measured is None. A place has more keys; the rules leave them alone."""

    name: str
    path: str
    role: str
    kind: str
    fs_type: str | None
    same_as: str | None
    repeats: int | None
    import_modules: int | None
    free_bytes: int | None
    small_file_bytes: int | None
    used_pct: float | None
    inodes_used_pct: float | None
    import_cold_s: float | None
    import_cold_spread_s: float | None
    small_read_cold_files_per_s: float | None
    small_read_cold_spread_files_per_s: float | None
    stream_read_MiB_per_s: float | None
    stream_write_MiB_per_s: float | None
    stream_write_spread_MiB_per_s: float | None


class Advice(NamedTuple):
    """One recommendation: its topic, what to do, why (with the numbers), and the place."""

    topic: str
    recommendation: str
    reason: str
    place: str | None = None


def _places(measurements: dict) -> list[Place]:
    """The places to compare: one per file system and role (a place measured as the same file
    system as another of its role, `same_as`, stands behind it and is named with it)."""
    places: list[Place] = list(measurements.get("places") or [])
    roles: dict[str | None, str | None] = {p["name"]: p.get("role") for p in places}
    # a twin in another role (/tmp beside home) still stands for that role
    return [p for p in places if roles.get(p.get("same_as"), "") != p.get("role")]


def _also(place: Place, measurements: dict) -> str:
    """' (one file system with a, b)' for the places measured as the same as `place`."""
    twins = [
        p["name"] for p in measurements.get("places") or [] if p.get("same_as") == place["name"]
    ]
    return f" (one file system with {', '.join(twins)})" if twins else ""


def _value(place: Place, key: Figure) -> float | None:
    value = place.get(key)
    return None if value is None else float(value)


def _with(places: list[Place], key: Figure) -> list[Place]:
    """The places where `key` was measured."""
    return [place for place in places if _value(place, key) is not None]


def _measured(place: Place, key: Figure) -> float:
    """`key` of a place where it was measured (one that _with kept)."""
    value = _value(place, key)
    assert value is not None, f"{key} of {place.get('name')} was not measured"
    return value


def _role(place: Place, role: str) -> bool:
    return place.get("role") == role


def _local_temporary(place: Place) -> bool:
    """A node-local place for temporary files: not memory, not over the network."""
    return _role(place, "temporary") and place.get("kind") in ("local", "host-shared")


class _Tie(NamedTuple):
    """How far from the best a place may be and still be no measured difference, and why."""

    band: float
    why: str


def _tie(best: Place, other: Place, key: Figure) -> _Tie:
    """The gap `other` may have from `best` in `key` without being a measured difference.

    The larger of the two places' measured run-to-run spreads, but never under
    WORTH_A_MOVE_PCT of the best; ASSUMED_NOISE_PCT where neither spread was measured.
    """
    target = abs(_value(best, key) or 0.0)
    spread = SPREAD_OF.get(key)
    spreads = (
        []
        if spread is None
        else [s for s in (_value(best, spread), _value(other, spread)) if s is not None]
    )
    if not spreads:
        return _Tie(
            target * ASSUMED_NOISE_PCT / 100,
            f"within {ASSUMED_NOISE_PCT:.0f} %, the noise assumed where the "
            "run-to-run spread was not measured",
        )
    floor = target * WORTH_A_MOVE_PCT / 100
    if max(spreads) >= floor:
        runs = best.get("repeats") or other.get("repeats")
        counted = f" of {runs} runs" if runs else ""
        return _Tie(
            max(spreads),
            f"within the spread{counted} measured in each place, {_figure(max(spreads), key)}",
        )
    return _Tie(floor, f"under {WORTH_A_MOVE_PCT:.0f} %, too small to be worth a move")


def _figure(value: float, key: str) -> str:
    """`value` in the unit that `key` names."""
    if key.endswith("_s") and not key.endswith("_per_s"):
        return f"{value:.2f} s"
    return _rate(value, "files/s" if "files" in key else "MiB/s")


def _close(best: Place, others: list[Place], key: Figure) -> list[tuple[Place, _Tie]]:
    """The places no measurably different from `best` in `key`, with the reason, `best`
    first (its own entry's reason is unused); all of them measured `key`."""
    tied = [(best, _Tie(0.0, ""))]
    for place in others:
        if place is best:
            continue
        tie = _tie(best, place, key)
        if abs(_measured(place, key) - _measured(best, key)) <= tie.band:
            tied.append((place, tie))
    return tied


def _pick(places: list[Place], key: Figure, lowest: bool = False) -> Place:
    """The best place in `key`; among those no measurably different from it (_tie), the
    first in the order the places were listed, so two runs on a quiet machine agree."""
    best = (min if lowest else max)(places, key=lambda p: _measured(p, key))
    tied = {id(p) for p, _ in _close(best, places, key)}
    return next(p for p in places if id(p) in tied)


def _similar(best: Place, others: list[Place], key: Figure) -> str:
    """'; no measured difference from a (why), b (why): either will do', or ''."""
    close = [f"{p['name']} ({tie.why})" for p, tie in _close(best, others, key)[1:]]
    return f"; no measured difference from {', '.join(close)}: either will do" if close else ""


def _rate(value: float, unit: str) -> str:
    return f"{value:,.0f} {unit}" if value >= 10 else f"{value:.2g} {unit}"


def environment_rule(measurements: dict) -> Advice | None:
    """Where a Python or conda environment should live: the persistent place with the
    fastest cold import (`import_cold_s`, a generated package of `import_modules` small
    modules, its files evicted from the page cache).

    An environment must outlive the job, so only places with role "persistent" count, never
    /dev/shm (memory) or node-local temporary space. None when no persistent place has an
    import time.
    """
    measured = _with([p for p in _places(measurements) if _role(p, "persistent")], "import_cold_s")
    if not measured:
        return None
    best = _pick(measured, "import_cold_s", lowest=True)
    worst = max(measured, key=lambda p: _measured(p, "import_cold_s"))
    modules = best.get("import_modules")
    what = f"a package of {modules} modules" if modules else "a package of many small modules"
    times = ", ".join(f"{p['name']} {_measured(p, 'import_cold_s'):.2f} s" for p in measured)
    reason = f"importing {what} cold took {times}"
    if len(measured) > 1 and _measured(best, "import_cold_s") > 0:
        ratio = _measured(worst, "import_cold_s") / _measured(best, "import_cold_s")
        reason += f" ({ratio:.1f}x faster than in {worst['name']})"
    reason += _similar(best, measured, "import_cold_s")
    return Advice(
        "environment",
        f"Create Python/conda environments in {best['name']}"
        f" ({best.get('path')}){_also(best, measurements)}.",
        reason,
        best["name"],
    )


def _dataset_place(measurements: dict) -> Place | None:
    """The persistent place that reads small files fastest, cold; None if none was measured."""
    measured = _with(
        [p for p in _places(measurements) if _role(p, "persistent")], "small_read_cold_files_per_s"
    )
    return _pick(measured, "small_read_cold_files_per_s") if measured else None


def dataset_rule(measurements: dict) -> Advice | None:
    """Where a dataset of many small files should live: the persistent place with the highest
    cold small-file read rate (`small_read_cold_files_per_s`).

    If a local temporary place reads small files at least STAGE_MIN_RATIO times faster, the
    advice adds: copy (or unpack) the dataset there at the start of each job. None when no
    persistent place has a cold small-file rate.
    """
    best = _dataset_place(measurements)
    if best is None:
        return None
    key: Figure = "small_read_cold_files_per_s"
    measured = _with([p for p in _places(measurements) if not _role(p, "memory")], key)
    rates = ", ".join(
        f"{p['name']} {_rate(_measured(p, key), 'files/s')}"
        for p in sorted(measured, key=lambda p: -_measured(p, key))
    )
    size = best.get("small_file_bytes")
    recommendation = (
        f"Keep many-file datasets in {best['name']} ({best.get('path')})"
        f"{_also(best, measurements)}."
    )
    reason = f"reading {size or 'small'}-byte files cold: {rates}"
    reason += _similar(best, _with([p for p in measured if _role(p, "persistent")], key), key)
    local = [
        p
        for p in measured
        if _local_temporary(p) and _measured(p, key) >= STAGE_MIN_RATIO * _measured(best, key)
    ]
    if local:
        fast = max(local, key=lambda p: _measured(p, key))
        recommendation += (
            f" In a job, copy or unpack it to {fast['name']} first: it reads "
            f"small files {_measured(fast, key) / _measured(best, key):.1f}x "
            "faster."
        )
    return Advice("dataset", recommendation, reason, best["name"])


def packing_rule(measurements: dict) -> Advice | None:
    """Whether to pack a many-file dataset into an archive or shards, in the dataset's place:
    the seconds one GB takes as small files (`small_read_cold_files_per_s` x
    `small_file_bytes`) against streamed (`stream_read_MiB_per_s`), both cold.

    Packing is advised from PACK_MIN_RATIO times fewer seconds per GB on. None when the
    dataset's place lacks either rate.
    """
    place = _dataset_place(measurements)
    if place is None:
        return None
    files_per_s = _value(place, "small_read_cold_files_per_s")
    file_bytes = _value(place, "small_file_bytes")
    stream = _value(place, "stream_read_MiB_per_s")
    if not files_per_s or not file_bytes or not stream:
        return None
    small_s_per_gb = GB / (files_per_s * file_bytes)
    stream_s_per_gb = GB / (stream * MIB)
    ratio = small_s_per_gb / stream_s_per_gb
    reason = (
        f"in {place['name']}, {int(file_bytes)}-byte files at "
        f"{_rate(files_per_s, 'files/s')} take {small_s_per_gb:,.1f} s per GB; streamed "
        f"at {_rate(stream, 'MiB/s')} one GB takes {stream_s_per_gb:,.2f} s"
    )
    if ratio >= PACK_MIN_RATIO:
        recommendation = (
            f"Pack many-file datasets into an archive or shards: {ratio:,.0f} "
            f"times fewer seconds per GB in {place['name']}."
        )
    else:
        recommendation = (
            f"Small files cost little in {place['name']} ({ratio:.1f}x); packing is optional here."
        )
    return Advice("packing", recommendation, reason, place["name"])


def checkpoint_rule(measurements: dict) -> Advice | None:
    """Where checkpoints go: the persistent place with the fastest streaming write
    (`stream_write_MiB_per_s`; advise measures it with an fsync, so it is the storage's rate).

    If that place is on the network and a local temporary place writes at least
    LOCAL_FIRST_MIN_RATIO times faster, the advice is to write there first and copy the
    finished file to the persistent place in the background (training waits only for the
    local write). None when no persistent place has a streaming write rate.
    """
    key: Figure = "stream_write_MiB_per_s"
    persistent = _with([p for p in _places(measurements) if _role(p, "persistent")], key)
    if not persistent:
        return None
    best = _pick(persistent, key)
    rates = ", ".join(
        f"{p['name']} {_rate(_measured(p, key), 'MiB/s')}"
        for p in sorted(_with(_places(measurements), key), key=lambda p: -_measured(p, key))
    )
    reason = f"streaming write: {rates}"
    if len(persistent) == 1:
        reason += " (the only persistent place with this figure)"
    reason += _similar(best, persistent, key)
    recommendation = (
        f"Save checkpoints to {best['name']} ({best.get('path')}){_also(best, measurements)}."
    )
    local = [p for p in _with(_places(measurements), key) if _local_temporary(p)]
    fast = max(local, key=lambda p: _measured(p, key), default=None)
    if (
        fast is not None
        and best.get("kind") == "network"
        and _measured(fast, key) >= LOCAL_FIRST_MIN_RATIO * _measured(best, key)
    ):
        recommendation = (
            f"Write checkpoints to {fast['name']} first, then copy each finished "
            f"file to {best['name']} in the background: the local write is "
            f"{_measured(fast, key) / _measured(best, key):.1f}x faster."
        )
    return Advice("checkpoints", recommendation, reason, best["name"])


def _roomy(place: Place) -> bool:
    """Room enough for a TMPDIR, or its free space not measured."""
    free = place.get("free_bytes")
    return free is None or free >= TMPDIR_MIN_FREE_BYTES


def tmpdir_rule(measurements: dict) -> Advice | None:
    """What TMPDIR should be: a local temporary place that is not memory, with at least
    TMPDIR_MIN_FREE_BYTES free (`free_bytes`); among those, the fastest streaming write.

    /dev/shm is never advised: what lands there takes RAM from the job. The reason warns
    when the place named ``tmp`` is memory or has less room than that. A candidate whose
    free space was not measured still counts, and the reason says so. None without a
    candidate.
    """
    places = _places(measurements)
    candidates = [p for p in places if _local_temporary(p) and _roomy(p)]
    if not candidates:
        return None
    best = max(
        candidates,
        key=lambda p: (_value(p, "stream_write_MiB_per_s") or 0, p.get("free_bytes") or 0),
    )
    free = best.get("free_bytes")
    room = f"{free / GB:,.1f} GB free" if free is not None else "free space not measured"
    fs_type = best.get("fs_type") or "type unknown"
    reason = f"{best['name']} is {best.get('kind')} ({fs_type}), {room}"
    streams: tuple[tuple[Figure, str], ...] = (
        ("stream_write_MiB_per_s", "write"),
        ("stream_read_MiB_per_s", "read"),
    )
    for key, what in streams:
        rate = _value(best, key)
        if rate is not None:
            reason += f", streaming {what} {_rate(rate, 'MiB/s')}"
    tmp = next((p for p in places if p.get("name") == "tmp"), None)
    if tmp is not None and tmp is not best:
        if tmp.get("kind") == "memory":
            reason += "; /tmp is in memory here"
        elif (tmp_free := tmp.get("free_bytes")) is not None and tmp_free < TMPDIR_MIN_FREE_BYTES:
            reason += f"; warning: tmp has only {tmp_free / GB:.1f} GB free"
    return Advice(
        "TMPDIR", f"export TMPDIR={best.get('path')} ({best['name']}).", reason, best["name"]
    )


def nearly_full_rule(measurements: dict) -> Advice | None:
    """Which places are nearly full: NEARLY_FULL_PCT (80) % or more of the bytes
    (`used_pct`) or inodes (`inodes_used_pct`) used, the share of a distributed file system
    that can be relied on (lesson 11; NEARLY_FULL_SOURCE). None when no place is that full
    or nothing was measured.
    """
    shares: tuple[tuple[Figure, str], ...] = (("used_pct", "bytes"), ("inodes_used_pct", "inodes"))
    full = []
    for place in _places(measurements):
        parts = [
            f"{used:.0f} % of its {what} used"
            for key, what in shares
            if (used := _value(place, key)) is not None and used >= NEARLY_FULL_PCT
        ]
        if parts:
            full.append((place["name"], " and ".join(parts)))
    if not full:
        return None
    names = ", ".join(name for name, _ in full)
    reason = "; ".join(f"{name} has {text}" for name, text in full)
    return Advice(
        "nearly full",
        f"Free space or move data off {names} before writing there.",
        f"{reason}; only about {NEARLY_FULL_PCT:.0f} % is reliably usable ({NEARLY_FULL_SOURCE})",
        names,
    )


RULES: tuple[Callable[[dict], Advice | None], ...] = (
    environment_rule,
    dataset_rule,
    packing_rule,
    checkpoint_rule,
    tmpdir_rule,
    nearly_full_rule,
)


def advise(measurements: dict) -> list[Advice]:
    """Every rule's advice for one measurement set, in RULES order; rules with nothing to
    say are left out."""
    return [advice for rule in RULES if (advice := rule(measurements)) is not None]
