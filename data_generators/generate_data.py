#!/usr/bin/env python3
"""Generate the small-files dataset: one CSV per day, 24 hourly rows each.

The layout and schema are those of the classic small-files teaching demo
(data/activity_YYYY_M/activity_YYYY_M_D.csv, header ",hour,activity_level"), so material
written for it works unchanged. Unlike that demo this one is seeded (same seed, byte-identical
files), covers real consecutive days, and writes a manifest (per-file sha256, rows, bytes and
the exact expected mean) that the readers' results are checked against.

    python data_generators/generate_data.py --out workspace/dataset
    python data_generators/generate_data.py --out workspace/dataset --verify
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the lab's iolab/ package

from iolab import dataset as ds  # noqa: E402
from iolab.errors import LabError, run_cli  # noqa: E402
from iolab.workspace import check_capacity, ensure_writable_dir  # noqa: E402

#: Disk use per file: one block on most file systems, however small the file.
BYTES_PER_FILE_ON_DISK = 4096
#: Room to leave for the archive written next to the dataset (ustar: 1 KiB per member).
ARCHIVE_BYTES_PER_FILE = 1024


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Write the lab's deterministic small-files dataset and its manifest.",
        epilog="A dataset that already verifies is reused; one that does not is rebuilt.",
    )
    parser.add_argument("--out", type=Path, required=True, help="dataset directory to write")
    parser.add_argument(
        "--files", type=int, default=ds.DEFAULT_FILES,
        help=f"number of daily files (default {ds.DEFAULT_FILES}: 20 years from 2004-01-01)",
    )
    parser.add_argument("--seed", type=int, default=ds.DEFAULT_SEED, help="random seed (default 1)")
    parser.add_argument("--verify", action="store_true", help="only check DIR against its manifest")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if not 1 <= args.files <= 100_000:
        parser.error("--files must be between 1 and 100000")
    return args


def matches_request(manifest: dict, files: int, seed: int) -> bool:
    """Whether an existing manifest describes the dataset that was asked for."""
    return manifest.get("file_count") == files and manifest.get("seed") == seed


def clear_previous(out: Path) -> None:
    """Remove an earlier (possibly half-written) dataset, but only one this lab made."""
    data = out / "data"
    if data.exists() and not (out / ds.MARKER_NAME).exists():
        raise LabError(
            f"{data} exists but was not written by this lab; choose an empty directory for --out"
        )
    for name in (ds.MANIFEST_NAME, "archive.json", "data.tar"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(data, ignore_errors=True)


def progress(iterable, total: int, quiet: bool):
    """A progress bar on stderr when someone is watching."""
    if quiet or not sys.stderr.isatty():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, unit="file", desc="generating", file=sys.stderr)


def write_dataset(out: Path, files: int, seed: int, quiet: bool) -> dict:
    """Write every file, then the manifest last so that only a finished run looks complete."""
    rng = random.Random(seed)
    entries = []
    total_rows = total_bytes = activity_sum = 0
    (out / ds.MARKER_NAME).write_text("written by the storage I/O lab's generate_data.py\n")
    made_dirs: set[Path] = set()
    for day in progress(ds.days(files), files, quiet):
        levels = [rng.randint(1, 4) for _ in range(ds.HOURS_PER_FILE)]
        payload = ds.csv_text(levels).encode()
        rel = ds.day_path(day)
        path = out / rel
        if path.parent not in made_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(path.parent)
        path.write_bytes(payload)
        entries.append({"path": rel, "sha256": hashlib.sha256(payload).hexdigest(),
                        "rows": len(levels), "bytes": len(payload)})
        total_rows += len(levels)
        total_bytes += len(payload)
        activity_sum += sum(levels)
    manifest = {
        "format_version": ds.FORMAT_VERSION,
        "generator": "data_generators/generate_data.py",
        "seed": seed,
        "first_day": ds.FIRST_DAY.isoformat(),
        "file_count": files,
        "directory_count": len(made_dirs),
        "total_rows": total_rows,
        "total_bytes": total_bytes,
        "activity_sum": activity_sum,
        "expected_mean": activity_sum / total_rows,
        "files": entries,
    }
    partial = out / (ds.MANIFEST_NAME + ".partial")
    partial.write_text(json.dumps(manifest, indent=0))
    os.replace(partial, out / ds.MANIFEST_NAME)
    return manifest


def generate(out: Path, files: int = ds.DEFAULT_FILES, seed: int = ds.DEFAULT_SEED,
             quiet: bool = False) -> tuple[dict, bool]:
    """Make sure `out` holds the requested, verified dataset; returns (manifest, reused)."""
    out = ensure_writable_dir(out)
    existing = ds.verify_dataset(out)
    if existing.ok and matches_request(existing.manifest, files, seed):
        return existing.manifest, True
    clear_previous(out)
    check_capacity(out, files * (BYTES_PER_FILE_ON_DISK + ARCHIVE_BYTES_PER_FILE), files + 1000)
    return write_dataset(out, files, seed, quiet), False


def main() -> int:
    args = parse_args()
    if args.verify:
        result = ds.verify_dataset(args.out)
        print(result.summary())
        return 0 if result.ok else 1
    start = time.perf_counter()
    manifest, reused = generate(args.out, args.files, args.seed, args.quiet)
    verb = "reused (verified)" if reused else f"written in {time.perf_counter() - start:.2f} s"
    print(f"Dataset {args.out}: {manifest['file_count']} files, {manifest['total_rows']} rows, "
          f"{manifest['total_bytes']} bytes, {verb}")
    print(f"Expected mean activity_level: {manifest['expected_mean']!r}")
    return 0


if __name__ == "__main__":
    run_cli(main)
