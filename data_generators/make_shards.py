#!/usr/bin/env python3
"""Pack the activity dataset into webdataset shards: one sample per day, KEY.csv members.

Each sample's key is its day (2004-01-01) and its `csv` member holds the daily file's bytes
exactly, so a mean computed from the shards equals the dataset manifest's expected mean. The
shards are plain ustar tars (GNU `tar -tf` lists them) with fixed header fields, so two
builds are byte-identical; shards.json (shard list, samples, size, sha256) is written last.

    python data_generators/make_shards.py --data workspace/dataset
    python data_generators/make_shards.py --data workspace/dataset --shard-size-mb 2
    python data_generators/make_shards.py --data workspace/dataset --verify
"""

from __future__ import annotations

import argparse
import time
from datetime import date, timedelta
from pathlib import Path

from iolab.core.errors import Interrupted, LabError, interrupts_held, quiet_interrupts, run_cli

quiet_interrupts()  # from here on Ctrl-C or SIGTERM is one sentence, while starting too

from iolab.core import dataset as ds  # noqa: E402
from iolab.core import samples as sm  # noqa: E402
from iolab.core import shards as sh  # noqa: E402
from iolab.core.capacity import check_capacity  # noqa: E402
from iolab.core.generator_report import made_how, verify_report  # noqa: E402
from iolab.core.options import Bounds, add_data_option, float_option, int_option, path_option  # noqa: E402
from iolab.core.workspace import default_dataset_dir  # noqa: E402
from iolab.core.writer_lock import build_once  # noqa: E402

DEFAULT_SAMPLES_PER_SHARD = 1000
#: The sample counts and sizes a shard may be cut to.
SAMPLES_PER_SHARD = Bounds(
    1,
    ds.MAX_FILES,
    "samples",
    "a shard of more samples than the largest dataset holds would be the whole dataset anyway",
)
SHARD_SIZE_MB = Bounds(
    0.01, 100_000, "MB", "10 kB holds about ten daily files; 100 GB is beyond any real shard"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Write webdataset shards (one sample per day) from the verified activity dataset."
        ),
        epilog="Shards that already verify for the same dataset and sharding are reused.",
    )
    add_data_option(
        parser,
        "dataset directory with manifest.json (default: the workspace's dataset)",
        default=default_dataset_dir(),
    )
    parser.add_argument(
        "--out", type=path_option("--out"), help="shard directory (default: DATA/shards)"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--samples-per-shard",
        type=int_option("--samples-per-shard", SAMPLES_PER_SHARD),
        help=f"samples in each shard (default {DEFAULT_SAMPLES_PER_SHARD})",
    )
    size.add_argument(
        "--shard-size-mb",
        type=float_option("--shard-size-mb", SHARD_SIZE_MB),
        help="largest shard size in MB (10^6 bytes) instead of a sample count",
    )
    parser.add_argument(
        "--verify", action="store_true", help="only check the shards against their index"
    )
    args = parser.parse_args(argv)
    if args.samples_per_shard is None and args.shard_size_mb is None:
        args.samples_per_shard = DEFAULT_SAMPLES_PER_SHARD
    args.out = args.out or args.dataset_dir / sm.SHARDS_DIR
    return args


def sharding(samples_per_shard: int | None, shard_size_mb: float | None) -> dict:
    """How the shards were cut, recorded in the index so a different request rebuilds."""
    return {"samples_per_shard": samples_per_shard, "shard_size_mb": shard_size_mb}


def source_identity(manifest: dict) -> dict:
    """What identifies the dataset the shards came from (a regenerated dataset differs)."""
    keys = (
        "seed",
        "first_day",
        "file_count",
        "total_rows",
        "total_bytes",
        "activity_sum",
        "expected_mean",
    )
    return {key: manifest[key] for key in keys}


def reusable(out: Path, source: dict, cut: dict) -> dict | None:
    """The existing index if its shards verify and were cut from this dataset this way."""
    if sh.verify_shards(out):
        return None
    index = sh.load_shard_index(out)
    if index.get("source") == source and index.get("sharding") == cut:
        return index
    return None


def write_shards(
    dataset_dir: Path, out: Path, manifest: dict, source: dict, cut: dict, plan: list[range]
) -> dict:
    """Write the planned shards as partials, then swap them in with their index, uninterrupted."""
    files = manifest["files"]
    first_day = date.fromisoformat(manifest["first_day"])

    def day_samples(indices: range):
        for i in indices:
            key = (first_day + timedelta(days=i)).isoformat()
            payload = ds.read_data_file(dataset_dir, files[i]["path"])
            yield key, {sm.PAYLOAD_EXT[sm.ACTIVITY]: payload}

    try:
        entries = sh.write_partial_shards(out, (day_samples(indices) for indices in plan))
    except KeyboardInterrupt:
        raise Interrupted(
            f"the half-written shards were removed; {out} is as it was before"
        ) from None
    except OSError as err:
        raise LabError(
            f"writing the shards in {out} failed ({err.strerror or err}); the "
            "half-written shards were removed"
        ) from None
    index = {
        "format_version": sh.INDEX_FORMAT_VERSION,
        "generator": "data_generators/make_shards.py",
        "kind": sm.ACTIVITY,
        "payload_ext": sm.PAYLOAD_EXT[sm.ACTIVITY],
        "source": source,
        "sharding": cut,
        "shard_count": len(entries),
        "sample_count": sum(entry["samples"] for entry in entries),
        "payload_bytes": manifest["total_bytes"],
        "shard_bytes": sum(entry["bytes"] for entry in entries),
        "expected_mean": manifest["expected_mean"],
        "shards": entries,
    }
    try:
        with interrupts_held():
            sh.commit_shards(out, index)
    except KeyboardInterrupt:
        raise Interrupted(f"the new shards in {out} were complete") from None
    return index


def build(
    dataset_dir: Path,
    out: Path,
    samples_per_shard: int | None = DEFAULT_SAMPLES_PER_SHARD,
    shard_size_mb: float | None = None,
) -> tuple[dict, bool]:
    """Make sure `out` holds verified shards of the dataset in `dataset_dir`: (index, reused).

    Shards that verify are reused without writing (also in a read-only place); otherwise one
    run at a time builds them, and the result is reported only once it verifies on disk.
    """
    manifest = ds.require_verified(dataset_dir)
    source, cut = source_identity(manifest), sharding(samples_per_shard, shard_size_mb)

    def build(out: Path) -> dict:
        sizes = [sh.sample_tar_bytes([entry["bytes"]]) for entry in manifest["files"]]
        plan = sh.plan_shards(
            sizes, samples_per_shard, None if shard_size_mb is None else int(shard_size_mb * 1e6)
        )
        sh.prepare_shard_dir(out)
        check_capacity(out, sum(sizes) + len(plan) * sh.TAR_RECORD, len(plan) + 10)
        index = write_shards(dataset_dir, out, manifest, source, cut, plan)
        problems = sh.verify_shards(out)
        if problems or sh.load_shard_index(out) != index:
            raise LabError(
                f"the shards written to {out} do not verify "
                f"({problems[0] if problems else 'another run replaced them'})"
            )
        return index

    return build_once(Path(out), lambda out: reusable(out, source, cut), build)


def main() -> int:
    args = parse_args()
    if args.verify:
        return verify_report(args.out, sh.verify_shards(args.out))
    start = time.perf_counter()
    index, reused = build(args.dataset_dir, args.out, args.samples_per_shard, args.shard_size_mb)
    verb = made_how(reused, start)
    print(
        f"Shards {args.out}: {index['shard_count']} shards, {index['sample_count']} samples, "
        f"{index['shard_bytes']} bytes ({index['payload_bytes']} payload), {verb}"
    )
    return 0


if __name__ == "__main__":
    run_cli(main)
