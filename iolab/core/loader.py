"""Reading a dataset's samples as a training loop does: from files or shards, with or without
DataLoader workers, and checking a full read against the manifest.

This is about the dataset formats, not about measuring them, so it lives in the core: the
demo read_samples.py uses it and imports nothing above the core. torch and webdataset are
imported inside the functions that need them, so the core imports without them.

API (every sample is a (key, payload bytes) tuple; batches are lists of samples):

    torch_available() -> bool
    dataset_shards(dataset_dir) -> list[Path]               shards of DIR/shards (index checked)
    file_samples(dataset_dir, order=None) -> iterator       one open+read per sample
    shard_samples(shards, shardshuffle=False, seed=0, buffer_size=0) -> iterator (webdataset)
        shards: a dataset directory (reads DIR/shards/shards.json) or a list of shard paths
    batches(dataset_dir, source="files"|"shards", workers=None|0|1|2|4, batch_size=32,
            sampler=None, shardshuffle=False, buffer_size=0, seed=0) -> iterator of lists
        workers=None: no DataLoader (plain Python, webdataset alone for shards);
        workers=0..N: a torch DataLoader (files: map-style dataset over paths, optional
        `sampler` such as iolab.ml.shuffling.EpochSampler; shards: WebDataset as an
        IterableDataset, shards split across workers by webdataset's split_by_worker).
    read_throughput(dataset_dir, source, workers=None, batch_size=32, limit=None) -> ReadResult
        .samples .payload_bytes .wall_s .cpu_s .samples_per_s .bw_MiBps .mean .row()
        times only timed_read: the listing, reading and decoding each sample, and the
        counts; the checks come after (tests/test_reader_timer.py traces it)
    expected_result(dataset_dir) -> {"samples", "mean"}     what a full read must give
    check_full_read(dataset_dir, source, result)            LabError unless it was the dataset

Layouts: DIR/data/ (activity CSVs) or DIR/files/ (image-like samples), shards in DIR/shards/
(built by data_generators/make_shards.py and make_images.py); iolab.core.samples.Dataset.
"""

from __future__ import annotations

import os
import resource
import tarfile
import time
import warnings
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, cast

from iolab.core import shards as sh
from iolab.core.errors import LabError
from iolab.core.samples import ACTIVITY, SHARDS_DIR, Dataset, sample_value

if TYPE_CHECKING:
    from torch.utils.data import Dataset as TorchDataset

SOURCES = ("files", "shards")
Sample = tuple[str, bytes]
NO_TORCH = (
    "PyTorch is not installed, so there are no DataLoader workers; read without "
    "workers (webdataset alone, --workers omitted) or install it with `make torch`"
)


def torch_available() -> bool:
    """Whether PyTorch can be imported: the lab uses it for DataLoader workers when it is there."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def dataset_shards(dataset_dir: Path) -> list[Path]:
    """The shards of a dataset (DIR/shards), from an index that says the build finished."""
    shard_dir = Path(dataset_dir) / SHARDS_DIR
    return sh.shard_paths(shard_dir, sh.require_shards(shard_dir))


def _no_link_no_wait(path: str, flags: int) -> int:
    """Open a sample file without following a link and without waiting on a FIFO: the listing
    refused both already (Dataset.sample_files), and this closes the gap to a swap since, at
    no extra system call."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


def _read(path: str) -> bytes:
    with open(path, "rb", opener=_no_link_no_wait) as handle:
        return handle.read() or b""  # None: a FIFO swapped in, with nothing to read yet


def file_samples(dataset_dir: Path, order: Iterable[int] | None = None) -> Iterator[Sample]:
    """Every sample stored as its own file (listing the tree first), in key order or `order`."""
    files = Dataset.at(dataset_dir).sample_files()  # now: a missing dataset fails at the call
    indices = range(len(files)) if order is None else order
    return ((files[i][0], _read(files[i][1])) for i in indices)


class _KeyPayload:
    """Turns a webdataset sample dict into (key, payload); a class so workers can pickle it."""

    def __init__(self, ext: str) -> None:
        self.ext = ext

    def __call__(self, sample: dict) -> Sample:
        return sample["__key__"], sample[self.ext]


def _shard_set(shards: Path | Sequence[Path]) -> tuple[list[Path], str]:
    """Shard paths and payload extension, reading the index once (a dataset dir or shard paths)."""
    if isinstance(shards, (str, Path)):
        shard_dir = Path(shards) / SHARDS_DIR
        index = sh.require_shards(shard_dir)
        return sh.shard_paths(shard_dir, index), index["payload_ext"]
    paths = [Path(path) for path in shards]
    if not paths:
        raise LabError("no shards were given; pass a dataset directory or at least one shard path")
    return paths, sh.load_shard_index(paths[0].parent)["payload_ext"]


def _webdataset(
    shards: Path | Sequence[Path], shardshuffle: int | bool, seed: int, buffer_size: int
):
    import webdataset as wds  # imports torch when installed (seconds): only when shards are read

    paths, ext = _shard_set(shards)
    dataset = wds.WebDataset(
        [str(path) for path in paths],
        shardshuffle=shardshuffle,
        seed=seed,
        empty_check=False,
        verbose=0,
    )
    if buffer_size > 0:
        dataset = dataset.shuffle(buffer_size, seed=seed)
    return dataset.map(_KeyPayload(ext))


def shard_samples(
    shards: Path | Sequence[Path],
    shardshuffle: int | bool = False,
    seed: int = 0,
    buffer_size: int = 0,
) -> Iterator[Sample]:
    """Samples read by webdataset from shards (a dataset directory or a list of shard paths).

    shardshuffle=False reads shards in order; a number N shuffles the shard list with a
    buffer of N. buffer_size > 0 adds webdataset's sample shuffle buffer. Both use `seed`.
    """
    return iter(_webdataset(shards, shardshuffle, seed, buffer_size))


class FileDataset:
    """A map-style dataset over the sample files: item i is opened and read when asked for."""

    def __init__(self, dataset_dir: Path) -> None:
        self.files = Dataset.at(dataset_dir).sample_files()

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> Sample:
        key, path = self.files[i]
        return key, _read(path)


def _as_list(batch: list) -> list:
    """Collate that keeps a batch as a list of (key, bytes): nothing to turn into tensors."""
    return batch


def _chunks(items: Iterator[Sample], size: int) -> Iterator[list[Sample]]:
    while chunk := list(islice(items, size)):
        yield chunk


def batches(
    dataset_dir: Path,
    source: str = "files",
    workers: int | None = None,
    batch_size: int = 32,
    sampler: Iterable[int] | None = None,
    shardshuffle: int | bool = False,
    buffer_size: int = 0,
    seed: int = 0,
) -> Generator[list[Sample], None, None]:
    """Batches of samples as a training loop receives them; see the module docstring.

    Bad arguments are refused here, before any reading starts (not at the first batch).
    """
    if source not in SOURCES:
        raise LabError(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    if batch_size < 1:
        raise LabError(f"the batch size must be at least 1, not {batch_size}")
    if sampler is not None and source == "shards":
        raise LabError(
            "a sampler needs random access, which shards do not give; use "
            "shardshuffle= and buffer_size= for shards, or read files"
        )
    if workers is not None and workers < 0:
        raise LabError(f"the number of workers must be 0 or more, not {workers}")
    if workers is not None and not torch_available():
        raise LabError(NO_TORCH)
    return _batches(
        Path(dataset_dir), source, workers, batch_size, sampler, shardshuffle, buffer_size, seed
    )


def _batches(
    dataset_dir: Path,
    source: str,
    workers: int | None,
    batch_size: int,
    sampler: Iterable[int] | None,
    shardshuffle: int | bool,
    buffer_size: int,
    seed: int,
) -> Generator[list[Sample], None, None]:
    if workers is None:
        items = (
            file_samples(dataset_dir, sampler)
            if source == "files"
            else shard_samples(dataset_dir, shardshuffle, seed, buffer_size)
        )
        yield from _chunks(items, batch_size)
        return
    from torch.utils.data import DataLoader

    with warnings.catch_warnings():
        # The lab sweeps worker counts past the CPU count on purpose (the machine context
        # records the CPUs); torch's advice to use fewer would only clutter every table.
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        if source == "files":
            # torch takes any object with __getitem__ and __len__ as a map-style dataset; its
            # stubs want its Dataset class, which the core cannot subclass (torch is optional)
            files = cast("TorchDataset[Sample]", FileDataset(dataset_dir))
            loader = DataLoader(
                files,
                batch_size=batch_size,
                sampler=sampler,
                num_workers=workers,
                collate_fn=_as_list,
            )
        else:
            dataset = _webdataset(dataset_dir, shardshuffle, seed, buffer_size)
            loader = DataLoader(
                dataset, batch_size=batch_size, num_workers=workers, collate_fn=_as_list
            )
        loading = iter(loader)
    yield from loading


@dataclass
class ReadResult:
    """One timed read: how many samples and bytes, how long, and the value they add up to."""

    source: str
    workers: int | None
    samples: int
    payload_bytes: int
    wall_s: float
    cpu_s: float
    value_sum: int
    value_count: int

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.wall_s

    @property
    def bw_MiBps(self) -> float:
        return self.payload_bytes / 2**20 / self.wall_s

    @property
    def mean(self) -> float | None:
        """Mean of the values read: activity level (activity dataset) or label (images)."""
        return self.value_sum / self.value_count if self.value_count else None

    def row(self) -> dict:
        """One tidy row, units in the column names."""
        return {
            "source": self.source,
            "workers": "none" if self.workers is None else str(self.workers),
            "samples": self.samples,
            "payload_bytes": self.payload_bytes,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "samples_per_s": self.samples_per_s,
            "bw_MiBps": self.bw_MiBps,
            "mean": self.mean,
        }


def _cpu_seconds() -> float:
    """CPU time of this process and its reaped children (finished DataLoader workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def read_throughput(
    dataset_dir: Path,
    source: str = "files",
    workers: int | None = None,
    batch_size: int = 32,
    limit: int | None = None,
) -> ReadResult:
    """Read (up to `limit`) samples once and time it, worker start-up included.

    Each payload is decoded to its value (activity levels, or the label) so the read is
    checked: a full read of the activity dataset gives exactly the manifest's expected mean.
    CPU time includes worker processes once they have exited (they have, when this returns).
    """
    kind = Dataset.at(dataset_dir).kind
    if source == "shards":
        import webdataset  # noqa: F401  (imported before the clock starts: it takes seconds)
    if workers is not None:
        torch_available()  # likewise torch
    cpu_start, wall_start = _cpu_seconds(), time.perf_counter()
    try:
        samples, payload, value_sum, value_count = timed_read(
            dataset_dir, kind, source, workers, batch_size, limit
        )
    except (tarfile.TarError, EOFError, OSError, KeyError, ValueError) as err:
        # webdataset passes tarfile's errors on (a truncated or changed shard), a worker
        # re-raises what it met; either is damaged input, said in one sentence
        if isinstance(err, OSError) and err.filename:  # e.g. a sample the user may not read
            detail = f"{err.strerror}: {err.filename}"
        else:
            detail = " ".join(str(err.args[0] if err.args else err).split())
        raise LabError(
            f"the {source} of {dataset_dir} could not be read ({type(err).__name__}: "
            f"{detail}); rebuild them with the generator that made them"
        ) from None
    wall_s, cpu_s = time.perf_counter() - wall_start, _cpu_seconds() - cpu_start
    return ReadResult(source, workers, samples, payload, wall_s, cpu_s, value_sum, value_count)


def timed_read(
    dataset_dir: Path,
    kind: str,
    source: str,
    workers: int | None,
    batch_size: int,
    limit: int | None,
) -> tuple[int, int, int, int]:
    """What read_throughput times: listing, reading and decoding each sample, and the running
    counts its result needs (samples, payload bytes, value sum and count). Nothing else: a
    test traces this function and fails on any other call of the lab's inside it."""
    samples = payload = value_sum = value_count = 0
    stream = batches(dataset_dir, source, workers, batch_size)
    try:
        for batch in stream:
            for key, data in batch[: None if limit is None else limit - samples]:
                total, count = sample_value(kind, data, key)
                samples, payload = samples + 1, payload + len(data)
                value_sum, value_count = value_sum + total, value_count + count
            if limit is not None and samples >= limit:
                break
    finally:
        stream.close()  # stops DataLoader workers now, so their CPU time is counted
    return samples, payload, value_sum, value_count


def expected_result(dataset_dir: Path) -> dict:
    """What a full read must give, from the manifest: sample count and mean value."""
    dataset = Dataset.at(dataset_dir)
    manifest = dataset.manifest
    if dataset.kind == ACTIVITY:
        return {"samples": manifest["file_count"], "mean": manifest["expected_mean"]}
    return {"samples": manifest["count"], "mean": manifest["label_sum"] / manifest["count"]}


def _expected_sums(dataset_dir: Path, source: str) -> tuple[int, int, int, str]:
    """(samples, value sum, value count) a full read of `source` must give, and what says so.

    Files are checked against the dataset's manifest, shards against their own index (made
    from a verified dataset); both are small files the lab already reads (bookkeeping).
    """
    dataset = Dataset.at(dataset_dir)
    if source == "shards":
        index = sh.load_shard_index(dataset.shards_dir)
        try:
            if dataset.kind == ACTIVITY:
                sums = index["source"]["activity_sum"], index["source"]["total_rows"]
            else:
                sums = index["label_sum"], index["sample_count"]
        except (KeyError, TypeError):
            raise LabError(
                f"the shard index in {dataset.shards_dir} is corrupted; rebuild "
                "the shards with the generator that made them"
            ) from None
        return index["sample_count"], *sums, "their index"
    manifest = dataset.manifest
    if dataset.kind == ACTIVITY:
        return (
            manifest["file_count"],
            manifest["activity_sum"],
            manifest["total_rows"],
            "the manifest",
        )
    return manifest["count"], manifest["label_sum"], manifest["count"], "the manifest"


def check_full_read(dataset_dir: Path, source: str, result: ReadResult) -> None:
    """Refuse a full read that is not the dataset: other samples, or other values.

    Costs no reading of data: the manifest or index is small, and the sums are what the
    read computed anyway. A damaged, missing or extra sample changes the count or a sum.
    """
    samples, value_sum, value_count, proof = _expected_sums(dataset_dir, source)
    if (result.samples, result.value_sum, result.value_count) == (samples, value_sum, value_count):
        return
    what = "samples" if result.samples != samples else "values (a sample was changed)"
    raise LabError(
        f"the {source} of {dataset_dir} do not match {proof}: {result.samples} samples "
        f"with a value sum of {result.value_sum} were read, {proof} says {samples} "
        f"with {value_sum}, so the {what} differ; rebuild them with the generator "
        "that made them"
    )
