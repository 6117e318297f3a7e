#!/usr/bin/env python3
r"""Write a synthetic image-like dataset, as many files and as webdataset shards.

Real training images (JPEG, 100 KB to a few MB) are incompressible bytes read whole; these
samples are pseudo-random bytes of a chosen size, deterministic from --seed, so nothing is
downloaded and the same seed gives byte-identical files and shards. Each sample's class is
derivable from its bytes (first byte modulo 10), and shards also carry it as KEY.cls, the
webdataset convention for a label.

    DIR/files/000000.bin ...     one file per sample
    DIR/shards/shard-000000.tar  members 000000.bin, 000000.cls, ... (+ shards.json)
    DIR/manifest.json            count, bytes, label sum, per-sample sha256 and label (last)

    python data_generators/make_images.py --data workspace/images
    python data_generators/make_images.py --data workspace/images --count 64 --sample-kb 2048 \
        --shard-mb 32
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

from iolab.core.errors import Interrupted, LabError, interrupts_held, quiet_interrupts, run_cli

quiet_interrupts()  # from here on Ctrl-C or SIGTERM is one sentence, while starting too

from iolab.core import dataset as ds  # noqa: E402
from iolab.core import samples as sm  # noqa: E402
from iolab.core import shards as sh  # noqa: E402
from iolab.core.budget import check  # noqa: E402
from iolab.core.capacity import check_capacity  # noqa: E402
from iolab.core.generator_report import made_how, verify_report  # noqa: E402
from iolab.core.options import SEEDS, add_budget_option, add_data_option, int_option  # noqa: E402
from iolab.core.workspace import WorkspaceEntry  # noqa: E402
from iolab.core.writer_lock import build_once  # noqa: E402

MANIFEST_NAME = sm.IMAGES_MANIFEST
MARKER_NAME = ".iolab-images"
#: What the marker says to whoever finds it (write_marker adds the folder's identity).
MARKER_TEXT = "written by the storage I/O lab's make_images.py: this folder holds lab images"
#: Every name a run replaces or deletes in its folder: whichever is there already must be
#: the lab's (ds.claim_folder).
REPLACES = (
    sm.IMAGE_FILES_DIR,
    sm.SHARDS_DIR,
    MANIFEST_NAME,
    MANIFEST_NAME + ".partial",
    MARKER_NAME,
)
MIN_SAMPLE_KB, MAX_SAMPLE_KB = 100, 8192
MAX_COUNT = 100_000
DEFAULTS = {"count": 512, "sample_kb": 256, "seed": 1, "shard_mb": 16.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Write a deterministic image-like dataset as files and as webdataset shards.",
        epilog=f"Defaults ({DEFAULTS['count']} x {DEFAULTS['sample_kb']} KB = 128 MB) suit a "
        "shared login node. A dataset that already verifies with the same options is reused.",
    )
    add_data_option(
        parser,
        "dataset directory (default: <workspace>/images)",
        default=WorkspaceEntry.IMAGES.path(),
        old_names=("--out",),
    )
    parser.add_argument("--count", type=int, default=DEFAULTS["count"], help="number of samples")
    parser.add_argument(
        "--sample-kb",
        type=int,
        default=DEFAULTS["sample_kb"],
        help=f"bytes per sample in KB (1024 bytes), {MIN_SAMPLE_KB} to {MAX_SAMPLE_KB}",
    )
    parser.add_argument(
        "--seed", type=int_option("--seed", SEEDS), default=DEFAULTS["seed"], help="random seed"
    )
    parser.add_argument(
        "--shard-mb",
        type=float,
        default=DEFAULTS["shard_mb"],
        help="largest shard size in MB (10^6 bytes)",
    )
    parser.add_argument("--verify", action="store_true", help="only check DIR against its manifest")
    add_budget_option(parser)
    return parser.parse_args(argv)


def check_request(count: int, sample_kb: int, shard_mb: float) -> None:
    """One sentence for each impossible request, before anything is written."""
    if not MIN_SAMPLE_KB <= sample_kb <= MAX_SAMPLE_KB:
        raise LabError(
            f"--sample-kb {sample_kb} is out of range; choose {MIN_SAMPLE_KB} to "
            f"{MAX_SAMPLE_KB} (100 KB to 8 MB, the size of typical training images)"
        )
    if not 1 <= count <= MAX_COUNT:
        raise LabError(f"--count {count} is out of range; choose 1 to {MAX_COUNT} samples")
    if not 0.1 <= shard_mb <= 100_000:
        raise LabError(f"--shard-mb {shard_mb} is out of range; choose 0.1 to 100000 MB")


def label_member(label: int) -> bytes:
    """The KEY.cls member: the class as decimal text, as webdataset's decoders expect."""
    return str(label).encode()


def verify_images(out: Path) -> list[str]:
    """Problems found checking files and shards against the manifest; empty if none."""
    return sm.image_files_problems(out) + sh.verify_shards(out / sm.SHARDS_DIR)


def clear_previous(out: Path) -> None:
    """Remove an earlier (possibly half-written) dataset, but only one this lab made: its
    folder carries the lab's marker, or what is there verifies."""
    ds.claim_folder(
        out,
        ds.present(out, REPLACES),
        MARKER_NAME,
        MARKER_TEXT,
        lambda out: not verify_images(out),
        "choose an empty directory for --data",
    )
    (out / MANIFEST_NAME).unlink(
        missing_ok=True
    )  # first: a half-rebuilt dataset never looks complete
    ds.discard_path(out / sm.IMAGE_FILES_DIR)


def write_dataset(out: Path, count: int, sample_kb: int, seed: int, shard_mb: float) -> dict:
    """Write files, then shards, then the manifest last."""
    size = sample_kb * 1024
    files = out / sm.IMAGE_FILES_DIR
    files.mkdir()
    entries = []
    for i in range(count):
        payload = sm.image_payload(seed, i, size)
        (files / f"{sm.image_key(i)}.bin").write_bytes(payload)
        entries.append(sm.image_entry(i, payload))
    shard_dir = out / sm.SHARDS_DIR
    sh.prepare_shard_dir(shard_dir)
    per_sample = sh.sample_tar_bytes([size, len(label_member(0))])
    plan = sh.plan_shards([per_sample] * count, shard_bytes=int(shard_mb * 1e6))

    def shard_samples(indices: range):
        for i in indices:
            payload = (files / f"{sm.image_key(i)}.bin").read_bytes()
            yield (
                sm.image_key(i),
                {"bin": payload, sm.LABEL_EXT: label_member(sm.image_label(payload))},
            )

    shard_entries = [
        sh.write_shard(shard_dir / sh.SHARD_NAME.format(n), shard_samples(indices))
        for n, indices in enumerate(plan)
    ]
    request = {"count": count, "sample_kb": sample_kb, "seed": seed, "shard_mb": shard_mb}
    manifest = sm.new_images_manifest(request, size, entries, len(shard_entries))
    sh.write_index(
        shard_dir,
        {
            "format_version": sh.INDEX_FORMAT_VERSION,
            "generator": "data_generators/make_images.py",
            "kind": sm.IMAGES,
            "payload_ext": sm.PAYLOAD_EXT[sm.IMAGES],
            "source": request,
            "shard_count": len(shard_entries),
            "sample_count": count,
            "payload_bytes": count * size,
            "shard_bytes": sum(e["bytes"] for e in shard_entries),
            "label_sum": manifest["label_sum"],
            "shards": shard_entries,
        },
    )
    sm.write_images_manifest(out, manifest)
    return manifest


def reusable(out: Path, request: dict) -> dict | None:
    """The manifest of a dataset in `out` that verifies and was made with `request`, else None.

    Only reads, so a valid dataset in a read-only place is reused.
    """
    if not out.is_dir() or verify_images(out):
        return None
    manifest = sm.load_images_manifest(out)
    return manifest if all(manifest.get(k) == v for k, v in request.items()) else None


def discard(out: Path) -> None:
    """Remove a half-written dataset; a second Ctrl-C meanwhile must not stop the removal."""
    with contextlib.suppress(KeyboardInterrupt), interrupts_held():
        (out / (MANIFEST_NAME + ".partial")).unlink(missing_ok=True)
        for name in (sm.IMAGE_FILES_DIR, sm.SHARDS_DIR):
            ds.discard_path(out / name)


def generate(
    out: Path,
    count: int = DEFAULTS["count"],
    sample_kb: int = DEFAULTS["sample_kb"],
    seed: int = DEFAULTS["seed"],
    shard_mb: float = DEFAULTS["shard_mb"],
) -> tuple[dict, bool]:
    """Make sure `out` holds the requested, verified dataset; returns (manifest, reused).

    One run at a time writes a directory (its lock); an interrupt removes the half-written
    files, and the result is reported only once it verifies on disk.
    """
    check_request(count, sample_kb, shard_mb)
    request = {"count": count, "sample_kb": sample_kb, "seed": seed, "shard_mb": shard_mb}

    def build(out: Path) -> dict:
        clear_previous(out)
        total = count * sample_kb * 1024
        check_capacity(out, 2 * total + 2 * count * sh.TAR_BLOCK, count + 100)  # files + shards
        try:
            manifest = write_dataset(out, count, sample_kb, seed, shard_mb)
        except KeyboardInterrupt:
            discard(out)
            raise Interrupted(f"the half-written dataset in {out} was removed") from None
        except OSError as err:
            discard(out)
            raise LabError(
                f"writing the images in {out} failed ({err.strerror or err}); the "
                "half-written dataset was removed"
            ) from None
        problems = verify_images(out)
        if problems:
            raise LabError(
                f"the dataset written to {out} does not verify ({problems[0]}); run "
                "make_images.py again"
            )
        return manifest

    return build_once(Path(out), lambda out: reusable(out, request), build)


def main() -> int:
    args = parse_args()
    if args.verify:
        return verify_report(args.dataset_dir, verify_images(args.dataset_dir))
    check_request(args.count, args.sample_kb, args.shard_mb)
    check(  # the samples are written twice: as files, and again inside the shards
        f"{args.count} samples of {args.sample_kb} KB",
        fix="use fewer --count or a smaller --sample-kb",
        compute_node=args.compute_node,
        files=args.count,
        data_mib=2 * args.count * args.sample_kb / 1024,
    )
    start = time.perf_counter()
    manifest, reused = generate(
        args.dataset_dir, args.count, args.sample_kb, args.seed, args.shard_mb
    )
    verb = made_how(reused, start)
    print(
        f"Images {args.dataset_dir}: {manifest['count']} samples x "
        f"{manifest['sample_bytes']} bytes as files and {manifest['shard_count']} shards, "
        f"label sum {manifest['label_sum']}, {verb}"
    )
    return 0


if __name__ == "__main__":
    run_cli(main)
