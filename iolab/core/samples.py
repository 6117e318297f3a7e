"""The two datasets the ML-pipeline lesson reads, seen as samples: a key and its bytes.

Both layouts exist side by side, as many files and as webdataset shards, so a reader can be
pointed at either and the results compared exactly:

- the activity dataset (data_generators/generate_data.py): one CSV per day; a sample is one
  day's file, key "2004-01-01", payload the file's bytes, value = its activity levels;
- the image-like dataset (data_generators/make_images.py): pseudo-random bytes per sample
  (incompressible, like JPEG), key "000123", with a class label derivable from the payload
  (`image_label`) so a reader can check what it read without a separate label file.

A dataset directory says what it is by what it holds: DIR/data/ (activity CSVs) or
DIR/files/ (image samples); its shards live in DIR/shards/ in both cases. Dataset.at reads
that once into a value; the image dataset's manifest is written and read here only.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from iolab.core.atomic import replace_json
from iolab.core.dataset import DATA_DIR, load_manifest, require_verified, sha256_in_dataset
from iolab.core.errors import LabError
from iolab.core.safe_input import (
    COUNT,
    INTEGER,
    NUMBER,
    SHA256,
    TEXT,
    UnsafeInput,
    field_check,
    list_of,
    listing_problem,
    read_checked_json,
    regular_files,
)
from iolab.core.user_paths import existing_dir

ACTIVITY = "activity"
IMAGES = "images"

#: Member extension of each kind's payload in a shard (webdataset groups members by key).
PAYLOAD_EXT = {ACTIVITY: "csv", IMAGES: "bin"}
#: Extension of the image label member (webdataset's convention for class ids).
LABEL_EXT = "cls"
IMAGE_CLASSES = 10
IMAGE_FILES_DIR = "files"
SHARDS_DIR = "shards"
#: Written last by data_generators/make_images.py: per-sample sha256 and label.
IMAGES_MANIFEST = "manifest.json"

_ACTIVITY_NAME = re.compile(r"activity_(\d+)_(\d+)_(\d+)\.csv$")
_IMAGE_KEY = re.compile(r"[0-9]{6,9}")
#: The image manifest's fields; a sample's key is digits only, so the file it names
#: (files/KEY.bin) cannot lie outside the dataset.
IMAGE_ENTRY_SCHEMA = {
    "key": field_check(
        lambda v: isinstance(v, str) and _IMAGE_KEY.fullmatch(v) is not None,
        "a sample key (six to nine digits)",
    ),
    "sha256": SHA256,
    "label": COUNT,
}
IMAGES_MANIFEST_SCHEMA = {
    "format_version": COUNT,
    "generator": TEXT,
    "count": COUNT,
    "sample_kb": COUNT,
    "seed": INTEGER,
    "shard_mb": NUMBER,
    "sample_bytes": COUNT,
    "total_bytes": COUNT,
    "classes": COUNT,
    "label_sum": COUNT,
    "shard_count": COUNT,
    "samples": list_of(IMAGE_ENTRY_SCHEMA),
}


@dataclass(frozen=True)
class Dataset:
    """A dataset directory resolved once: its kind and where its parts are.

    Resolving looks only at the layout, as any reader must; the manifest is read when first
    asked for and then kept, so a reader that never checks its result pays no open for it.
    """

    dataset_dir: Path
    kind: str

    @classmethod
    def at(cls, dataset_dir: Path | str) -> Dataset:
        """The dataset in `dataset_dir` (ACTIVITY if it holds data/, IMAGES if files/), or a
        LabError saying how to make one."""
        dataset_dir = existing_dir(
            dataset_dir,
            "give the dataset's folder, or create one with "
            "`python data_generators/generate_data.py --data DIR` or "
            "`python data_generators/make_images.py --data DIR`",
        )
        try:
            if (dataset_dir / DATA_DIR).is_dir():
                return cls(dataset_dir, ACTIVITY)
            if (dataset_dir / IMAGE_FILES_DIR).is_dir():
                return cls(dataset_dir, IMAGES)
        except PermissionError:
            raise LabError(
                f"cannot look into {dataset_dir}: you may not read that folder; fix "
                "its permissions (chmod u+rx) or choose another"
            ) from None
        raise LabError(
            f"{dataset_dir} holds no dataset (neither data/ nor {IMAGE_FILES_DIR}/); create one "
            "with `python data_generators/generate_data.py --data DIR` or "
            "`python data_generators/make_images.py --data DIR`"
        )

    @property
    def samples_dir(self) -> Path:
        """Where each sample is a file of its own: data/ (activity) or files/ (images)."""
        return self.dataset_dir / (DATA_DIR if self.kind == ACTIVITY else IMAGE_FILES_DIR)

    @property
    def shards_dir(self) -> Path:
        return self.dataset_dir / SHARDS_DIR

    @functools.cached_property
    def manifest(self) -> dict:
        """The manifest of either kind, or a LabError saying how to rebuild the dataset."""
        if self.kind == ACTIVITY:
            return load_manifest(self.dataset_dir)
        return load_images_manifest(self.dataset_dir)

    def sample_files(self) -> list[tuple[str, str]]:
        """(key, path) of every sample stored as its own file, in key order.

        The directory tree is listed (as a real reader must), not the manifest: the listing
        is part of what many small files cost on a shared file system. A link, FIFO, device
        or unreadable folder among the samples is refused (UnsafeInput) before any is read.
        Paths are strings: the loaders time this listing, and a Path per sample would be
        the lab's own Python counted as the cost of small files.
        """
        fix = "move it away and rebuild the dataset with the generator that made it"
        rels = regular_files(self.dataset_dir, self.samples_dir.name, fix)
        top = os.path.join(self.dataset_dir, "")
        if self.kind == IMAGES:
            found = [
                (os.path.basename(rel)[:-4], top + rel) for rel in rels if rel.endswith(".bin")
            ]
        else:
            found = [(activity_key(os.path.basename(rel)), top + rel) for rel in rels]
        found.sort()
        return found

    def require_intact_files(self) -> None:
        """Refuse sample files that differ from the manifest (every sha256), in one sentence."""
        if self.kind == ACTIVITY:
            require_verified(self.dataset_dir)
            return
        problems = image_files_problems(self.dataset_dir)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise LabError(
                f"the images in {self.dataset_dir} do not match their manifest: "
                f"{problems[0]}{more}; rebuild them with "
                f"`python data_generators/make_images.py --data {self.dataset_dir}`"
            )


# --------------------------------------------------------------------------- the image manifest


def image_entry(index: int, payload: bytes) -> dict:
    """One image sample as the manifest lists it."""
    return {
        "key": image_key(index),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "label": image_label(payload),
    }


def new_images_manifest(
    request: dict, sample_bytes: int, entries: list[dict], shard_count: int
) -> dict:
    """The manifest of a freshly made image dataset: the request (count, sample_kb, seed,
    shard_mb), totals, and its samples' entries (image_entry)."""
    return {
        "format_version": 1,
        "generator": "data_generators/make_images.py",
        **request,
        "sample_bytes": sample_bytes,
        "total_bytes": len(entries) * sample_bytes,
        "classes": IMAGE_CLASSES,
        "label_sum": sum(entry["label"] for entry in entries),
        "shard_count": shard_count,
        "samples": entries,
    }


def write_images_manifest(dataset_dir: Path, manifest: dict) -> None:
    """Write DIR/manifest.json in one rename: make_images.py's last step, proof of completion."""
    replace_json(Path(dataset_dir) / IMAGES_MANIFEST, manifest, indent=0)


def _images_fix(dataset_dir: Path) -> str:
    return f"`python data_generators/make_images.py --data {dataset_dir}`"


def images_manifest_problem(manifest: object) -> str | None:
    """What makes `manifest` unlike one make_images.py writes; None if nothing."""
    return listing_problem(manifest, IMAGES_MANIFEST_SCHEMA, "count", "samples", "key")


def load_images_manifest(dataset_dir: Path) -> dict:
    """DIR/manifest.json of an image dataset, checked against its schema, or a LabError (one
    saying the dataset was never completed if there is none; UnsafeInput if it is not what
    make_images.py writes)."""
    path = Path(dataset_dir) / IMAGES_MANIFEST
    try:
        return read_checked_json(
            path,
            images_manifest_problem,
            "the manifest",
            f"move it away and rebuild the images with {_images_fix(dataset_dir)}",
        )
    except (FileNotFoundError, NotADirectoryError):
        raise LabError(
            f"no manifest at {path} (the dataset was never completed); build it "
            f"with {_images_fix(dataset_dir)}"
        ) from None


def image_files_problems(dataset_dir: Path) -> list[str]:
    """Image sample files that are missing, extra or differ (sha256) from the manifest.

    The manifest is written last by data_generators/make_images.py, so its absence means the
    dataset was never completed; empty when every file is exactly what was generated. Input
    the lab will not read (a link, a FIFO, a manifest unlike the lab's) is UnsafeInput.
    """
    dataset_dir = Path(dataset_dir)
    try:
        entries = load_images_manifest(dataset_dir)["samples"]
    except UnsafeInput:
        raise
    except LabError as err:
        return [str(err)]
    fix = f"move it away and rebuild the images with {_images_fix(dataset_dir)}"
    on_disk = regular_files(dataset_dir, IMAGE_FILES_DIR, fix)
    expected = {f"{IMAGE_FILES_DIR}/{entry['key']}.bin": entry["sha256"] for entry in entries}
    problems = [
        f"{Path(rel).name} is missing or differs from the manifest"
        for rel, digest in expected.items()
        if rel not in on_disk or sha256_in_dataset(dataset_dir / rel, fix) != digest
    ]
    prefix = IMAGE_FILES_DIR + "/"
    return problems + [
        f"{rel.removeprefix(prefix)} is not in the manifest"
        for rel in sorted(on_disk - expected.keys())
    ]


def activity_key(name: str) -> str:
    """The ISO day of a daily CSV's file name: activity_2004_1_2.csv -> 2004-01-02."""
    match = _ACTIVITY_NAME.search(name)
    if not match:
        raise LabError(
            f"{name} is not a daily activity file (activity_Y_M_D.csv); "
            "rebuild the dataset with data_generators/generate_data.py"
        )
    year, month, day = map(int, match.groups())
    return date(year, month, day).isoformat()


def activity_value(payload: bytes) -> tuple[int, int]:
    """(sum of activity_level, rows) of one daily CSV; exact integers, so means match exactly."""
    total = rows = 0
    for line in payload.split(b"\n")[1:]:
        if line:
            total += int(line.rsplit(b",", 1)[1])
            rows += 1
    return total, rows


def image_label(payload: bytes) -> int:
    """The class of an image-like sample: its first byte modulo IMAGE_CLASSES."""
    return payload[0] % IMAGE_CLASSES


def sample_value(kind: str, payload: bytes, key: str = "") -> tuple[int, int]:
    """(value sum, value count) of one payload: activity levels and rows, or (label, 1).

    A payload that cannot be one (a damaged CSV, an empty sample) is a LabError.
    """
    try:
        if kind == ACTIVITY:
            return activity_value(payload)
        return image_label(payload), 1
    except (ValueError, IndexError):
        raise LabError(
            f"the sample {key or '(no key)'} is damaged: it is not a valid "
            f"{'daily activity CSV' if kind == ACTIVITY else 'image-like sample'}; "
            "rebuild the dataset with the generator that made it"
        ) from None


def image_payload(seed: int, index: int, size_bytes: int) -> bytes:
    """The bytes of image sample `index`: pseudo-random, the same for the same seed and index.

    Each sample has its own generator, so a sample does not depend on how many came before
    (a larger --count keeps the first samples byte-identical).
    """
    return random.Random(seed * 1_000_003 + index).randbytes(size_bytes)


def image_key(index: int) -> str:
    """Zero-padded key of image sample `index`: sorts the same as a string and as a number."""
    return f"{index:06d}"
