#!/usr/bin/env python3
"""Pack the small-files dataset into one uncompressed tar: DIR/data.tar.

The archive is written compactly (ustar format, integer modification times, members in
sorted order, owner fields blank), so each 193-byte file costs one 512-byte header plus one
512-byte data block. Python's default format (PAX, with the float modification times that
`tar.add` reads from the file system) adds a second header per member; the size that format
would have had is recorded in DIR/archive.json, because the per-member overhead of an
archive format is part of the lesson.

    python data_generators/create_archive.py --data workspace/dataset
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import io
import os
import tarfile
import time
from pathlib import Path

from iolab.core.errors import Interrupted, LabError, interrupts_held, quiet_interrupts, run_cli

quiet_interrupts()  # from here on Ctrl-C or SIGTERM is one sentence, while starting too

from iolab.core import dataset as ds  # noqa: E402
from iolab.core.capacity import check_capacity  # noqa: E402
from iolab.core.generator_report import made_how  # noqa: E402
from iolab.core.options import add_data_option  # noqa: E402
from iolab.core.workspace import public_text  # noqa: E402
from iolab.core.writer_lock import build_once  # noqa: E402

BLOCK = tarfile.BLOCKSIZE


class CountingSink(io.RawIOBase):
    """A write-only file that only counts bytes: measures a format's size without writing it."""

    def __init__(self) -> None:
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size


def member_mtime(rel: str) -> int:
    """An integer, reproducible mtime: midnight UTC of the day the file describes."""
    y, m, d = (int(x) for x in Path(rel).stem.split("_")[1:])
    return calendar.timegm((y, m, d, 0, 0, 0))


def write_ustar(dataset_dir: Path, paths: list[str], target: Path) -> None:
    """Write the compact archive: same input gives byte-identical output."""
    with (
        ds.create_new(target) as handle,
        tarfile.open(fileobj=handle, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for rel in paths:
            payload = ds.read_data_file(dataset_dir, rel)
            info = tarfile.TarInfo(rel)
            info.size = len(payload)
            info.mtime = member_mtime(rel)
            info.mode = 0o644
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(payload))


def default_format_size(dataset_dir: Path, paths: list[str]) -> int:
    """Size the archive would have with `tarfile.open(..., "w")` + `tar.add()` defaults."""
    sink = CountingSink()
    with tarfile.open(fileobj=sink, mode="w") as tar:
        for rel in paths:
            tar.add(dataset_dir / rel, arcname=rel)
    return sink.size


def archive_is_current(dataset_dir: Path) -> bool:
    """Whether an existing archive was made from this manifest and is unchanged since (an
    archive.json the lab will not read, a link or a FIFO, is refused by verify_archive)."""
    return os.path.lexists(dataset_dir / ds.ARCHIVE_INFO_NAME) and not ds.verify_archive(
        dataset_dir
    )


def commit(dataset_dir: Path, partial: Path, info: dict) -> None:
    """Replace the archive and its description together, uninterrupted."""
    with interrupts_held():
        (dataset_dir / ds.ARCHIVE_INFO_NAME).unlink(missing_ok=True)
        os.replace(partial, dataset_dir / ds.ARCHIVE_NAME)
        ds.write_archive_info(dataset_dir, info)


def write_archive(dataset_dir: Path, manifest: dict) -> dict:
    """Write data.tar under a partial name, describe it, and swap both into place.

    Until the swap the previous archive and archive.json stay as they were; an interrupt or
    an error removes the partial archive.
    """
    paths = sorted(entry["path"] for entry in manifest["files"])
    payload = manifest["total_bytes"]
    check_capacity(dataset_dir, len(paths) * 2 * BLOCK + payload, 2)
    partial = dataset_dir / (ds.ARCHIVE_NAME + ".partial")
    archive = dataset_dir / ds.ARCHIVE_NAME
    try:
        write_ustar(dataset_dir, paths, partial)
        info = ds.new_archive_info(
            dataset_dir, partial, len(paths), payload, default_format_size(dataset_dir, paths)
        )
    except KeyboardInterrupt:
        with contextlib.suppress(KeyboardInterrupt), interrupts_held():
            partial.unlink(missing_ok=True)
        raise Interrupted(
            f"the half-written archive was removed; {archive} is as it was before"
        ) from None
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise LabError(
            f"writing {archive} failed ({err.strerror or err}); the half-written "
            "archive was removed"
        ) from None
    except LabError:  # a data file swapped for a link or a FIFO since it verified
        partial.unlink(missing_ok=True)
        raise
    try:
        commit(dataset_dir, partial, info)
    except KeyboardInterrupt:
        raise Interrupted(f"the new archive {archive} was complete") from None
    except OSError as err:
        raise LabError(
            f"putting {archive} in place failed ({err.strerror or err}); run "
            f"`python data_generators/create_archive.py --data {dataset_dir}` again"
        ) from None
    return info


def create_archive(dataset_dir: Path) -> tuple[dict, bool]:
    """Make sure DIR/data.tar matches the verified dataset; returns (archive info, reused).

    A current archive is reused without writing anything (also in a read-only place); a new
    one is written by one run at a time and reported only once it verifies on disk.
    """
    dataset_dir = Path(dataset_dir)
    ds.require_verified(dataset_dir)

    def current(dataset_dir: Path) -> dict | None:
        return ds.load_archive_info(dataset_dir) if archive_is_current(dataset_dir) else None

    def build(dataset_dir: Path) -> dict:
        manifest = ds.require_verified(dataset_dir)  # another run may have replaced it meanwhile
        info = write_archive(dataset_dir, manifest)
        problems = ds.verify_archive(dataset_dir)
        if problems:
            raise LabError(f"the archive written to {dataset_dir} does not verify ({problems[0]})")
        return info

    # the dataset folder is there already (it verified): no folder to create
    return build_once(dataset_dir, current, build, create=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_option(
        parser,
        "dataset directory (holding data/ and manifest.json)",
        required=True,
        old_names=("--out",),
    )
    args = parser.parse_args()
    start = time.perf_counter()
    info, reused = create_archive(args.dataset_dir)
    verb = made_how(reused, start)
    print(
        f"Archive {public_text(args.dataset_dir / ds.ARCHIVE_NAME)}: {info['members']} members, "
        f"{info['archive_bytes']} bytes for {info['payload_bytes']} bytes of data "
        f"({info['overhead_ratio']:.1f}x), {verb}"
    )
    print(
        f"Python's default tar format would take {info['default_format_bytes']} bytes "
        f"({info['default_overhead_ratio']:.1f}x)"
    )
    return 0


if __name__ == "__main__":
    run_cli(main)
