"""Webdataset shards as the lab writes and checks them: plain tar files plus an index.

A shard is an ordinary ustar tar whose members are KEY.EXT, the members of one sample next
to each other, which is all webdataset needs (GNU `tar -tf` lists it too). The lab writes
the tars with Python's tarfile rather than webdataset's TarWriter because every header field
is fixed here (mtime, owner, mode): the same input gives byte-identical shards, so a shard's
sha256 in the index proves it is the one that was built.

The index (shards.json, next to the shards) lists every shard with its sample count, size and
sha256. A build writes its shards under hidden partial names and swaps them in together with
the index at the end (commit_shards), so the previous set stays complete until then and an
interrupted build leaves nothing half-written; the caller holds the directory's writer lock
(iolab.core.writer_lock).
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import stat
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from iolab.core.atomic import replace_json
from iolab.core.dataset import claim_folder, create_new, present, sha256_in_dataset, sha256_of
from iolab.core.errors import LabError, interrupts_held
from iolab.core.safe_input import (
    COUNT,
    SHA256,
    TEXT,
    NotRegularFile,
    UnsafeInput,
    field_check,
    file_kind,
    list_of,
    read_checked_json,
    record_problem,
    unreadable,
)

INDEX_NAME = "shards.json"
MARKER_NAME = ".iolab-shards"
#: What the shard folder's marker says to whoever finds it (write_marker adds its identity).
MARKER_TEXT = "written by the storage I/O lab's shard writer: this folder holds lab shards"
SHARD_NAME = "shard-{:06d}.tar"
SHARD_GLOB = "shard-*.tar"
PARTIAL_GLOB = ".shard-*.tar.partial"
_SHARD_FILE = re.compile(r"shard-[0-9]{6,}\.tar")
#: The index fields a reader or writer uses; a shard's name is a bare file name, so no entry
#: of the index can lead out of the shard folder.
SHARD_ENTRY_SCHEMA = {
    "name": field_check(
        lambda v: isinstance(v, str) and _SHARD_FILE.fullmatch(v) is not None,
        "a shard file name (shard-NNNNNN.tar)",
    ),
    "samples": COUNT,
    "bytes": COUNT,
    "sha256": SHA256,
}
INDEX_SCHEMA = {
    "kind": TEXT,
    "payload_ext": TEXT,
    "sample_count": COUNT,
    "shards": list_of(SHARD_ENTRY_SCHEMA),
}
_FIX = "move it away and rebuild the shards with the generator that made them"
INDEX_FORMAT_VERSION = 1
#: Every member's mtime (2000-01-01T00:00:00Z): a fixed value makes shards reproducible.
FIXED_MTIME = 946_684_800
TAR_BLOCK = 512
#: tarfile pads an archive to a multiple of 20 blocks, after two zero blocks at the end.
TAR_RECORD = 20 * TAR_BLOCK

Sample = tuple[str, dict[str, bytes]]  # (key, {extension: bytes})


def member_tar_bytes(size_bytes: int) -> int:
    """Bytes one member takes in a ustar archive: a header block plus its data, padded."""
    return TAR_BLOCK + -(-size_bytes // TAR_BLOCK) * TAR_BLOCK


def sample_tar_bytes(member_sizes: Iterable[int]) -> int:
    """Bytes one sample (all its members) takes in a shard."""
    return sum(member_tar_bytes(size) for size in member_sizes)


def plan_shards(
    sample_bytes: Sequence[int],
    samples_per_shard: int | None = None,
    shard_bytes: int | None = None,
) -> list[range]:
    """Split samples 0..n-1 into consecutive shards, by count or by a size budget.

    With a size budget a shard takes samples until the next one would exceed it (at least
    one sample per shard, so a sample larger than the budget gets a shard of its own).
    """
    n = len(sample_bytes)
    if (samples_per_shard is None) == (shard_bytes is None):
        raise ValueError("give exactly one of samples_per_shard and shard_bytes")
    if samples_per_shard is not None:
        return [
            range(start, min(start + samples_per_shard, n))
            for start in range(0, n, samples_per_shard)
        ]
    assert shard_bytes is not None  # exactly one of the two was given (checked above)
    plan, start, used = [], 0, 0
    for index, size in enumerate(sample_bytes):
        if index > start and used + size > shard_bytes:
            plan.append(range(start, index))
            start, used = index, 0
        used += size
    if n > start:
        plan.append(range(start, n))
    return plan


def write_shard(path: Path, samples: Iterable[Sample]) -> dict:
    """Write one shard and return its index entry (name, samples, bytes, sha256, first/last key)."""
    keys: list[str] = []
    with (
        create_new(path) as handle,
        tarfile.open(fileobj=handle, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for key, members in samples:
            keys.append(key)
            for ext in sorted(members):
                data = members[ext]
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = FIXED_MTIME
                info.mode = 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = "iolab"
                tar.addfile(info, io.BytesIO(data))
    return {
        "name": path.name,
        "samples": len(keys),
        "bytes": path.stat().st_size,
        "sha256": sha256_of(path),
        "first_key": keys[0] if keys else None,
        "last_key": keys[-1] if keys else None,
    }


def partial_path(shard_dir: Path, name: str) -> Path:
    """Where shard `name` is written before the build commits it."""
    return Path(shard_dir) / f".{name}.partial"


def prepare_shard_dir(shard_dir: Path) -> None:
    """Make a shard directory ready for a build, refusing one whose shards the lab did not make.

    Shards, an index or partial files there are the lab's only if the folder carries its
    marker or the shards verify (claim_folder). Partial shards a killed build left behind
    are removed (the caller holds the lock, so no running build owns them); the complete
    set, if any, stays until commit_shards.
    """
    shard_dir.mkdir(parents=True, exist_ok=True)
    found = (
        [path.name for path in sorted(shard_dir.glob(SHARD_GLOB))]
        + present(shard_dir, (INDEX_NAME, INDEX_NAME + ".partial"))
        + [path.name for path in sorted(shard_dir.glob(PARTIAL_GLOB))]
        + present(shard_dir, (MARKER_NAME,))
    )
    claim_folder(
        shard_dir,
        found,
        MARKER_NAME,
        MARKER_TEXT,
        lambda d: not verify_shards(d),
        "choose an empty directory with --out",
    )
    discard_partial_shards(shard_dir)


def discard_partial_shards(shard_dir: Path) -> None:
    """Remove partial shards; a second Ctrl-C meanwhile must not stop the removal."""
    with contextlib.suppress(KeyboardInterrupt), interrupts_held():
        for path in Path(shard_dir).glob(PARTIAL_GLOB):
            path.unlink(missing_ok=True)


def write_partial_shards(shard_dir: Path, shards: Iterable[Iterable[Sample]]) -> list[dict]:
    """Write each shard under its partial name; index entries carry the final names.

    On any exception, Ctrl-C included, the partial shards written so far are removed.
    """
    entries = []
    try:
        for number, samples in enumerate(shards):
            name = SHARD_NAME.format(number)
            entries.append({**write_shard(partial_path(shard_dir, name), samples), "name": name})
    except BaseException:
        discard_partial_shards(shard_dir)
        raise
    return entries


def commit_shards(shard_dir: Path, index: dict) -> None:
    """Replace the previous shard set by the partial one and write the index last.

    Call it inside iolab.core.errors.interrupts_held: it must not stop halfway.
    """
    (shard_dir / INDEX_NAME).unlink(
        missing_ok=True
    )  # first: a half-swapped set never looks complete
    names = {entry["name"] for entry in index["shards"]}
    for old in shard_dir.glob(SHARD_GLOB):
        if old.name not in names:
            old.unlink()
    for name in names:
        os.replace(partial_path(shard_dir, name), shard_dir / name)
    write_index(shard_dir, index)


def write_index(shard_dir: Path, index: dict) -> None:
    """Write shards.json atomically: it is the proof that every shard was written."""
    replace_json(Path(shard_dir) / INDEX_NAME, index, indent=1)


_INDEX_CACHE: dict[tuple, dict] = {}


def _index_problem(index: object) -> str | None:
    return record_problem(index, INDEX_SCHEMA)


def load_shard_index(shard_dir: Path) -> dict:
    """DIR/shards.json checked against its schema, or a LabError that says how to build the
    shards (UnsafeInput for an index the lab did not write as it is)."""
    path = Path(shard_dir) / INDEX_NAME
    hint = (
        "build them with `python data_generators/make_shards.py` (activity dataset) or "
        "`python data_generators/make_images.py` (image-like dataset)"
    )
    missing = LabError(
        f"no complete shards in {shard_dir} (no {INDEX_NAME}, so the build never finished); {hint}"
    )
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        raise missing from None
    except OSError as err:
        raise unreadable(path, err, hint) from None
    # A reader consults the index before and after reading (to check what it read): one
    # open per run keeps the system-call counts the lessons show. Writers replace the index
    # by rename, so a rewritten index has another inode and is read afresh.
    key = (str(path.resolve()), st.st_ino, st.st_mtime_ns, st.st_size)
    if key not in _INDEX_CACHE:
        try:
            _INDEX_CACHE[key] = read_checked_json(
                path, _index_problem, "the shard index", f"move it away and {hint}"
            )
        except (FileNotFoundError, NotADirectoryError):
            raise missing from None
    return copy.deepcopy(_INDEX_CACHE[key])


def shard_paths(shard_dir: Path, index: dict) -> list[Path]:
    """The shard files of an index, in order."""
    return [Path(shard_dir) / entry["name"] for entry in index["shards"]]


def verify_shards(shard_dir: Path) -> list[str]:
    """Problems found checking every shard against the index (sha256, size); empty if none.

    A shard the lab will not read (a link, a FIFO, unreadable) is UnsafeInput, raised.
    """
    try:
        index = load_shard_index(shard_dir)
    except UnsafeInput:
        raise
    except LabError as err:
        return [str(err)]
    problems = []
    for entry, path in zip(index["shards"], shard_paths(shard_dir, index), strict=True):
        try:
            st = path.lstat()
        except FileNotFoundError:
            problems.append(f"{entry['name']} is missing")
            continue
        except OSError as err:
            raise unreadable(path, err, _FIX) from None
        if not stat.S_ISREG(st.st_mode):
            raise unreadable(path, NotRegularFile(path, st.st_mode), _FIX)
        if st.st_size != entry["bytes"] or sha256_in_dataset(path, _FIX) != entry["sha256"]:
            problems.append(f"{entry['name']} differs from the index")
    return problems


def _size_problem(entry: dict, path: Path) -> str | None:
    """Why a shard cannot be the one in the index, from one lstat (as cheap as checking that
    it exists): missing, not a regular file, or another size (truncated or half-copied)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return f"{entry['name']} is missing"
    except OSError as err:
        return f"{entry['name']} cannot be read ({err.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"{entry['name']} is {file_kind(st.st_mode)}, not a regular file"
    if st.st_size != entry["bytes"]:
        return (
            f"{entry['name']} has {st.st_size} bytes, the index says {entry['bytes']} "
            "(truncated or replaced)"
        )
    return None


def require_shards(shard_dir: Path, verify: bool = False) -> dict:
    """The index of a complete shard set; with verify=True every shard's sha256 is checked too.

    Readers that time themselves pass verify=False: hashing every shard first would read it
    all into the page cache and turn a cold measurement into a warm one.
    """
    index = load_shard_index(shard_dir)
    problems = (
        verify_shards(shard_dir)
        if verify
        else [
            problem
            for entry, path in zip(index["shards"], shard_paths(shard_dir, index), strict=True)
            if (problem := _size_problem(entry, path))
        ]
    )
    if problems:
        raise LabError(
            f"the shards in {shard_dir} do not match their index ({problems[0]}); "
            "rebuild them with the generator that made them"
        )
    return index
