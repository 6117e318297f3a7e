"""The two datasets the ML-pipeline lesson reads, seen as samples: a key and its bytes.

Both layouts exist side by side, as many files and as webdataset shards, so a reader can be
pointed at either and the results compared exactly:

- the activity dataset (data_generators/generate_data.py): one CSV per day; a sample is one
  day's file, key "2004-01-01", payload the file's bytes, value = its activity levels;
- the image-like dataset (data_generators/make_images.py): pseudo-random bytes per sample
  (incompressible, like JPEG), key "000123", with a class label derivable from the payload
  (`image_label`) so a reader can check what it read without a separate label file.

A dataset directory says what it is by what it holds: DIR/data/ (activity CSVs) or
DIR/files/ (image samples); its shards live in DIR/shards/ in both cases.
"""

from __future__ import annotations

import json
import os
import random
import re
from datetime import date
from pathlib import Path

from iolab.dataset import sha256_of
from iolab.errors import LabError
from iolab.workspace import existing_dir

ACTIVITY = "activity"
IMAGES = "images"
KINDS = (ACTIVITY, IMAGES)

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


def dataset_kind(data_dir: Path) -> str:
    """ACTIVITY or IMAGES, from the layout of `data_dir`, or a LabError saying how to make one."""
    data_dir = existing_dir(data_dir, "give the dataset's folder, or create one with "
                            "`python data_generators/generate_data.py --out DIR` or "
                            "`python data_generators/make_images.py --out DIR`")
    if (data_dir / "data").is_dir():
        return ACTIVITY
    if (data_dir / IMAGE_FILES_DIR).is_dir():
        return IMAGES
    raise LabError(
        f"{data_dir} holds no dataset (neither data/ nor {IMAGE_FILES_DIR}/); create one with "
        "`python data_generators/generate_data.py --out DIR` or "
        "`python data_generators/make_images.py --out DIR`"
    )


def image_files_problems(data_dir: Path) -> list[str]:
    """Image sample files that are missing, extra or differ (sha256) from the manifest.

    The manifest is written last by data_generators/make_images.py, so its absence means the
    dataset was never completed; empty when every file is exactly what was generated.
    """
    path = Path(data_dir) / IMAGES_MANIFEST
    if not path.is_file():
        return [f"no manifest at {path} (the dataset was never completed)"]
    try:
        entries = json.loads(path.read_text())["samples"]
    except (ValueError, KeyError, TypeError):
        return [f"the manifest {path} is corrupted"]
    files = Path(data_dir) / IMAGE_FILES_DIR
    problems = []
    for entry in entries:
        sample = files / f"{entry['key']}.bin"
        if not sample.is_file() or sha256_of(sample) != entry["sha256"]:
            problems.append(f"{sample.name} is missing or differs from the manifest")
    on_disk = set(os.listdir(files)) if files.is_dir() else set()
    extra = on_disk - {f"{entry['key']}.bin" for entry in entries}
    return problems + [f"{name} is not in the manifest" for name in sorted(extra)]


def activity_key(name: str) -> str:
    """The ISO day of a daily CSV's file name: activity_2004_1_2.csv -> 2004-01-02."""
    match = _ACTIVITY_NAME.search(name)
    if not match:
        raise LabError(f"{name} is not a daily activity file (activity_Y_M_D.csv); "
                       "rebuild the dataset with data_generators/generate_data.py")
    year, month, day = map(int, match.groups())
    return date(year, month, day).isoformat()


def sample_files(data_dir: Path) -> list[tuple[str, Path]]:
    """(key, path) of every sample stored as its own file, in key order.

    The directory tree is listed (as a real reader must), not the manifest: the listing is
    part of what many small files cost on a shared file system.
    """
    data_dir = Path(data_dir)
    kind = dataset_kind(data_dir)
    if kind == IMAGES:
        root = data_dir / IMAGE_FILES_DIR
        found = [(Path(name).stem, root / name) for name in os.listdir(root) if name.endswith(".bin")]
    else:
        found = [(activity_key(name), Path(folder) / name)
                 for folder, _dirs, names in os.walk(data_dir / "data") for name in names]
    return sorted(found)


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
        raise LabError(f"the sample {key or '(no key)'} is damaged: it is not a valid "
                       f"{'daily activity CSV' if kind == ACTIVITY else 'image-like sample'}; "
                       "rebuild the dataset with the generator that made it") from None


def image_payload(seed: int, index: int, size_bytes: int) -> bytes:
    """The bytes of image sample `index`: pseudo-random, the same for the same seed and index.

    Each sample has its own generator, so a sample does not depend on how many came before
    (a larger --count keeps the first samples byte-identical).
    """
    return random.Random(seed * 1_000_003 + index).randbytes(size_bytes)


def image_key(index: int) -> str:
    """Zero-padded key of image sample `index`: sorts the same as a string and as a number."""
    return f"{index:06d}"
