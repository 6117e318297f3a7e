#!/usr/bin/env python3
"""Generate the small-files dataset: one CSV per day, 24 hourly rows each.

The layout and schema are those of the classic small-files teaching demo
(data/activity_YYYY_M/activity_YYYY_M_D.csv, header ",hour,activity_level"), so material
written for it works unchanged. Unlike that demo this one is seeded (same seed, byte-identical
files), covers real consecutive days, and writes a manifest (per-file sha256, rows, bytes and
the exact expected mean) that the readers' results are checked against.

The files are written into a hidden sibling of data/ and renamed into place when complete,
the manifest last; one run at a time may write a dataset directory (a lock file), and
"written" is printed only after the manifest on disk has verified as this run's. Ctrl-C or
SIGTERM removes the half-written files.

    python data_generators/generate_data.py --data workspace/dataset
    python data_generators/generate_data.py --data workspace/dataset --verify
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import time
from pathlib import Path

from iolab.core.errors import Interrupted, LabError, interrupts_held, quiet_interrupts, run_cli

quiet_interrupts()  # from here on Ctrl-C or SIGTERM is one sentence, while starting too

from iolab.core import dataset as ds  # noqa: E402
from iolab.core.budget import check  # noqa: E402
from iolab.core.capacity import check_capacity  # noqa: E402
from iolab.core.generator_report import made_how  # noqa: E402
from iolab.core.options import SEEDS, Bounds, add_budget_option, add_data_option, int_option  # noqa: E402
from iolab.core.workspace import public_text  # noqa: E402
from iolab.core.writer_lock import build_once  # noqa: E402

#: Disk use per file: one block on most file systems, however small the file.
BYTES_PER_FILE_ON_DISK = 4096
#: Room to leave for the archive written next to the dataset (ustar: 1 KiB per member).
ARCHIVE_BYTES_PER_FILE = 1024
#: How many daily files a run may write.
FILES = Bounds(
    1,
    ds.MAX_FILES,
    "files",
    "each file is an inode of a shared file system, and 100,000 days are 274 years",
)
#: Where a run writes before renaming into place, and where the replaced data waits to go.
PARTIAL_NAME = ".data.partial"
REPLACED_NAME = ".data.replaced"
#: Every name a run replaces or deletes in the dataset folder: whichever is there already must
#: be the lab's (ds.claim_folder). data/ first: it names the usual case in the refusal.
REPLACES = (
    ds.DATA_DIR,
    ds.MANIFEST_NAME,
    ds.ARCHIVE_NAME,
    ds.ARCHIVE_INFO_NAME,
    PARTIAL_NAME,
    REPLACED_NAME,
    ds.MANIFEST_NAME + ".partial",
    ds.MARKER_NAME,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Write the lab's deterministic small-files dataset and its manifest.",
        epilog="A dataset that already verifies is reused (also in a read-only place); one "
        "that does not is rebuilt. One run at a time may write a directory.",
    )
    add_data_option(parser, "dataset directory to write", required=True, old_names=("--out",))
    parser.add_argument(
        "--files",
        type=int_option("--files", FILES),
        default=ds.DEFAULT_FILES,
        help=f"number of daily files (default {ds.DEFAULT_FILES}: 20 years from 2004-01-01)",
    )
    parser.add_argument(
        "--seed",
        type=int_option("--seed", SEEDS),
        default=ds.DEFAULT_SEED,
        help="random seed (default 1)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="only check DIR against its manifest (data files and data.tar)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_budget_option(parser)
    return parser.parse_args(argv)


def matches_request(manifest: dict, files: int, seed: int) -> bool:
    """Whether an existing manifest describes the dataset that was asked for."""
    return manifest.get("file_count") == files and manifest.get("seed") == seed


def reusable(out: Path, files: int, seed: int) -> dict | None:
    """The manifest of a dataset in `out` that verifies and is the one asked for, else None.

    Only reads, so a valid dataset in a read-only place is reused. The archive is not part
    of this check: create_archive.py rebuilds a damaged one without regenerating the files.
    """
    existing = ds.verify_dataset(out, archive=False)
    if existing.ok and matches_request(existing.manifest, files, seed):
        return existing.manifest
    return None


def claim(out: Path) -> None:
    """Make `out` the lab's dataset folder, or refuse: a data/, manifest, archive or partial
    file there is replaced only if the lab wrote it (its marker) or the dataset verifies."""
    ds.claim_folder(
        out,
        ds.present(out, REPLACES),
        ds.MARKER_NAME,
        ds.MARKER_TEXT,
        lambda out: ds.verify_dataset(out, archive=False).ok,
        "choose an empty directory for --data, or move it away",
    )


def progress(iterable, total: int, quiet: bool):
    """A progress bar on stderr when someone is watching."""
    if quiet or not sys.stderr.isatty():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, unit="file", desc="generating", file=sys.stderr)


def write_files(partial: Path, files: int, seed: int, quiet: bool) -> dict:
    """Write every file below `partial` (standing in for data/); returns the manifest."""
    rng = random.Random(seed)
    entries = []
    activity_sum = 0
    made_dirs: set[Path] = set()
    for day in progress(ds.days(files), files, quiet):
        levels = [rng.randint(1, 4) for _ in range(ds.HOURS_PER_FILE)]
        payload = ds.csv_text(levels).encode()
        rel = ds.day_path(day)
        path = partial / Path(rel).relative_to(ds.DATA_DIR)
        if path.parent not in made_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(path.parent)
        path.write_bytes(payload)
        entries.append(ds.manifest_entry(rel, payload, len(levels)))
        activity_sum += sum(levels)
    return ds.new_manifest(seed, entries, len(made_dirs), activity_sum)


def commit(out: Path, partial: Path, manifest: dict) -> None:
    """Put the finished files in place of the old dataset, then the manifest, uninterrupted.

    The old manifest and the archive made from the old files go first, so no moment exists
    in which a manifest describes files that are not the ones on disk.
    """
    replaced = out / REPLACED_NAME
    with interrupts_held():
        for name in (ds.MANIFEST_NAME, ds.ARCHIVE_INFO_NAME, ds.ARCHIVE_NAME):
            (out / name).unlink(missing_ok=True)
        if os.path.lexists(out / ds.DATA_DIR):
            os.rename(out / ds.DATA_DIR, replaced)
        os.rename(partial, out / ds.DATA_DIR)
        ds.write_manifest(out, manifest)
        ds.discard_path(replaced)


def discard(partial: Path) -> None:
    """Remove half-written files; a second Ctrl-C meanwhile must not stop the removal."""
    with contextlib.suppress(KeyboardInterrupt), interrupts_held():
        ds.discard_path(partial)


def write_dataset(out: Path, files: int, seed: int, quiet: bool) -> dict:
    """Write the files into a hidden sibling of data/, commit, and check what is on disk.

    Called with the directory's lock held, so a sibling left by a killed run is ours to
    remove. Nothing half-written stays, and an interrupt says truly what was left.
    """
    partial = out / PARTIAL_NAME
    for leftover in (partial, out / REPLACED_NAME):
        ds.discard_path(leftover)
    try:
        manifest = write_files(partial, files, seed, quiet)
    except KeyboardInterrupt:
        discard(partial)
        raise Interrupted(
            f"the half-written files were removed; whatever {out} held before is unchanged"
        ) from None
    except OSError as err:
        discard(partial)
        raise LabError(
            f"writing the dataset in {out} failed ({err.strerror or err}); the "
            "half-written files were removed"
        ) from None
    try:
        commit(out, partial, manifest)
        confirm_written(out, manifest)
    except KeyboardInterrupt:
        raise Interrupted(
            f"the new dataset in {out} was complete; check it with {ds.verify_command(out)}"
        ) from None
    except OSError as err:
        raise LabError(
            f"putting the new dataset in place in {out} failed "
            f"({err.strerror or err}); run {ds.create_command(out)} again"
        ) from None
    return manifest


def confirm_written(out: Path, manifest: dict) -> None:
    """Make sure the dataset on disk is the one this run wrote, before saying so."""
    try:
        on_disk = ds.load_manifest(out)
    except LabError:
        on_disk = None
    result = ds.verify_dataset(out, archive=False)
    if on_disk != manifest or not result.ok:
        problem = result.problems[0] if result.problems else "another run replaced it"
        raise LabError(
            f"the dataset written to {out} does not verify ({problem}); run "
            f"{ds.create_command(out)} again"
        )


def generate(
    out: Path, files: int = ds.DEFAULT_FILES, seed: int = ds.DEFAULT_SEED, quiet: bool = False
) -> tuple[dict, bool]:
    """Make sure `out` holds the requested, verified dataset; returns (manifest, reused)."""

    def build(out: Path) -> dict:
        claim(out)
        check_capacity(out, files * (BYTES_PER_FILE_ON_DISK + ARCHIVE_BYTES_PER_FILE), files + 1000)
        return write_dataset(out, files, seed, quiet)

    return build_once(Path(out), lambda out: reusable(out, files, seed), build)


def main() -> int:
    args = parse_args()
    if args.verify:
        result = ds.verify_dataset(args.dataset_dir)
        print(result.summary())
        return 0 if result.ok else 1
    check(  # a login node's budget, as for the benchmarks: each file is an inode of it
        f"generating {args.files} files",
        fix="use fewer --files",
        compute_node=args.compute_node,
        files=args.files,
    )
    start = time.perf_counter()
    manifest, reused = generate(args.dataset_dir, args.files, args.seed, args.quiet)
    verb = made_how(reused, start)
    print(
        f"Dataset {public_text(args.dataset_dir)}: {manifest['file_count']} files, "
        f"{manifest['total_rows']} rows, {manifest['total_bytes']} bytes, {verb}"
    )
    print(f"Expected mean activity_level: {manifest['expected_mean']!r}")
    return 0


if __name__ == "__main__":
    run_cli(main)
