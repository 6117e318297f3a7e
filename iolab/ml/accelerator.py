"""A simulated accelerator, the way MLPerf Storage (DLIO) measures a storage system for training.

A GPU is expensive and should never wait for data. MLPerf Storage therefore replaces the model
with a sleep: each batch "computes" for a set time, and the storage passes when the emulated
accelerator is busy at least 90% of the time (70% for CosmoFlow). Accelerator utilization is

    AU = compute time / (compute time + time spent waiting for the next batch)

over all steps but the first: the first batch pays for starting the loader (forking
DataLoader workers, opening the first shard) and is excluded, as DLIO's
`metric_exclude_start_steps=1` does. A real training loop does what `simulate_training` does:
ask the loader for a batch (the wait), then compute. Everything the loop does not measure is
pure arithmetic on the recorded lists (`utilization`, `throughput`), so a fixed schedule gives
exact numbers in tests.

`sweep` repeats the loop over compute times and DataLoader worker counts, each run cold (the
dataset's pages evicted first, without root) or warm (read once first, so the page cache
serves it): a high AU on a warm cache measures memory, not storage, which is how a benchmark
can pass with no storage traffic at all after the first epoch.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from iolab.core.class_folder import CLASS_SWEEP_SAMPLES
from iolab.core.errors import LabError
from iolab.core.repeats import allowed_repeats
from iolab.core.samples import SHARDS_DIR, Dataset
from iolab.core.workspace import WorkspaceEntry, public_text
from iolab.measure import cache
from iolab.ml.accelerator_options import SKIP_FIRST

#: MLPerf Storage's pass line for UNet3D and ResNet-50 (CosmoFlow's is 70%).
PASS_AU_PCT = 90.0
MB = 1e6
WARM_READ_BYTES = 8 * 1024**2
CACHE_STATES = ("cold", "warm")
SWEEP_COLUMNS = [
    "source",
    "location",
    "cache_state",
    "workers",
    "compute_ms",
    "repeat",
    "steps",
    "resident_before_pct",
    "au_pct",
    "wait_total_s",
    "samples_per_s",
    "MBps",
]


# --------------------------------------------------------------------------- arithmetic


def _measured(values: Sequence[float], skip_first: int, what: str) -> list[float]:
    """The values after the warm-up steps; at least one must remain."""
    if skip_first < 0:
        raise LabError(f"skip_first must be 0 or more, not {skip_first}")
    kept = list(values)[skip_first:]
    if not kept:
        raise LabError(
            f"{len(values)} {what} recorded but {skip_first} skipped as warm-up: run "
            "more steps than the warm-up skips"
        )
    return kept


def _per_step(compute_s: float | Sequence[float], steps: int) -> list[float]:
    """One compute time per step: a constant, or the recorded list as it is."""
    if isinstance(compute_s, (int, float)):
        if compute_s < 0:
            raise LabError(f"the compute time must be 0 s or more, not {compute_s}")
        return [float(compute_s)] * steps
    values = list(compute_s)
    if len(values) != steps:
        raise LabError(f"{len(values)} compute times for {steps} steps: record one per step")
    return values


def utilization(
    wait_s: Sequence[float], compute_s: float | Sequence[float], skip_first: int = SKIP_FIRST
) -> float:
    """Accelerator utilization (0..1): compute / (compute + wait) over the steps after warm-up.

    `compute_s` is the set compute time per step, or the measured time of each step (a sleep
    on a loaded machine can overrun).
    """
    waits = _measured(wait_s, skip_first, "steps")
    computes = _measured(_per_step(compute_s, len(wait_s)), skip_first, "steps")
    busy = sum(computes)
    total = busy + sum(waits)
    if total <= 0:
        raise LabError("neither compute nor wait time was recorded: give a compute time above 0")
    return busy / total


def au_pct(
    wait_s: Sequence[float], compute_s: float | Sequence[float], skip_first: int = SKIP_FIRST
) -> float:
    """Accelerator utilization in percent, as MLPerf Storage reports it."""
    return 100.0 * utilization(wait_s, compute_s, skip_first)


def throughput(
    samples: Sequence[int], step_s: Sequence[float], skip_first: int = SKIP_FIRST
) -> float:
    """Samples (or bytes) per second delivered over the steps after warm-up."""
    counts = _measured(samples, skip_first, "steps")
    seconds = sum(_measured(step_s, skip_first, "steps"))
    if seconds <= 0:
        raise LabError("the measured steps took no time: give a compute time above 0")
    return sum(counts) / seconds


def needed_MBps(
    batch: int, record_MB: float, compute_s: float, au: float = PASS_AU_PCT / 100
) -> float:
    """MB/s one accelerator must be fed to stay at utilization `au` (MLPerf's derivation).

    Each step consumes batch x record_MB; at utilization au a step lasts compute_s / au.
    """
    if batch <= 0 or record_MB <= 0 or compute_s <= 0 or not 0 < au <= 1:
        raise LabError("batch, record size and compute time must be above 0 and au in (0, 1]")
    return batch * record_MB * au / compute_s


def workers_needed(samples_per_s_needed: float, samples_per_s_per_worker: float) -> int:
    """How many loader workers deliver a rate, if each adds the same (an upper-bound guess)."""
    if samples_per_s_needed <= 0 or samples_per_s_per_worker <= 0:
        raise LabError("both rates must be above 0 samples/s")
    return math.ceil(samples_per_s_needed / samples_per_s_per_worker)


# --------------------------------------------------------------------------- the loop


def batch_size(batch: Any) -> tuple[int, int]:
    """(samples, bytes) in a batch: bytes objects, arrays/tensors, or lists/tuples/dicts of them.

    A list or tuple counts its items as samples (a plain list of samples); an array or tensor
    (anything with `shape` and `nbytes`, as numpy and torch have) counts its first dimension; a
    dict (a webdataset sample or a collated batch) counts the largest of its values' sample
    counts. Strings and keys count as metadata, not bytes.
    """
    if isinstance(batch, (bytes, bytearray, memoryview)):
        return 1, len(batch)
    if hasattr(batch, "nbytes") and hasattr(batch, "shape"):
        return (int(batch.shape[0]) if len(batch.shape) else 1), int(batch.nbytes)
    if isinstance(batch, dict):
        sizes = [batch_size(value) for key, value in batch.items() if not str(key).startswith("__")]
        return max((n for n, _ in sizes), default=1), sum(b for _, b in sizes)
    if isinstance(batch, (list, tuple)):
        sizes = [batch_size(item) for item in batch]
        return len(sizes), sum(b for _, b in sizes)
    return 1, 0


@dataclass(frozen=True)
class TrainingRun:
    """Per-step record of one simulated training run; all times in seconds."""

    wait_s: list[float]
    compute_s: list[float]
    samples: list[int]
    bytes: list[int]

    @property
    def steps(self) -> int:
        return len(self.wait_s)

    @property
    def au_pct(self) -> float:
        return au_pct(self.wait_s, self.compute_s)

    @property
    def step_s(self) -> list[float]:
        return [w + c for w, c in zip(self.wait_s, self.compute_s, strict=True)]

    @property
    def samples_per_s(self) -> float:
        return throughput(self.samples, self.step_s)

    @property
    def MBps(self) -> float:
        return throughput(self.bytes, self.step_s) / MB

    def steps_frame(self) -> pd.DataFrame:
        """One row per step, for a plot of where the time went."""
        return pd.DataFrame(
            {
                "step": range(self.steps),
                "wait_s": self.wait_s,
                "compute_s": self.compute_s,
                "samples": self.samples,
                "bytes": self.bytes,
            }
        )


def simulate_training(
    batches: Iterable[Any],
    compute_s: float,
    steps: int,
    *,
    sizer: Callable[[Any], tuple[int, int]] = batch_size,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> TrainingRun:
    """Take `steps` batches, "computing" compute_s after each; record what each step waited.

    The wait is the time `next()` on the loader took: zero when a prefetching worker had the
    batch ready, the whole read when nothing was prefetched. Raises LabError when the loader
    runs out before `steps` (use fewer steps or a larger dataset).
    """
    if steps < SKIP_FIRST + 1:
        raise LabError(f"run at least {SKIP_FIRST + 1} steps: the first is warm-up and excluded")
    if compute_s < 0:
        raise LabError(f"the compute time must be 0 s or more, not {compute_s}")
    waits: list[float] = []
    computes: list[float] = []
    samples: list[int] = []
    sizes: list[int] = []
    iterator = iter(batches)
    try:
        for step in range(steps):
            start = clock()
            try:
                batch = next(iterator)
            except StopIteration:
                raise LabError(
                    f"the loader ran out after {step} of {steps} batches: run fewer "
                    "steps, smaller batches, or build a larger dataset"
                ) from None
            got = clock()
            sleep(compute_s)
            done = clock()
            count, size = sizer(batch)
            waits.append(got - start)
            computes.append(done - got)
            samples.append(count)
            sizes.append(size)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()  # stops DataLoader workers now, not whenever the loader is collected
    return TrainingRun(waits, computes, samples, sizes)


# --------------------------------------------------------------------------- sweep


def warm(path: Path | str) -> cache.Residency:
    """Read every file below `path` once, so the page cache holds it; returns the residency."""
    top = Path(path)
    files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
    for file in files:
        with open(file, "rb", buffering=0) as handle:
            while handle.read(WARM_READ_BYTES):
                pass
    return cache.residency(top)


def _paths(data: Path | str | Sequence[Path | str]) -> list[Path]:
    return [Path(data)] if isinstance(data, (str, Path)) else [Path(p) for p in data]


def prepare_cache(data: Path | str | Sequence[Path | str], state: str) -> float | None:
    """Make `data` cold (evicted) or warm (read once); returns the resident % of its bytes after,
    None where the kernel hides it (files the user neither owns nor may write, such as a
    class's shared samples: iolab.measure.cache.residency_visible).

    `data` may list several paths: over a network mount, the client's view (the mount) and
    the server's files (the exported directory) each have a page cache, and a cold run must
    empty both, or the server answers from memory.
    """
    if state not in CACHE_STATES:
        raise LabError(f"unknown cache state {state!r}: use 'cold' or 'warm'")
    residencies = [
        cache.evict(path).after if state == "cold" else warm(path) for path in _paths(data)
    ]
    if any(r.hidden for r in residencies):
        return None
    total = sum(r.total_bytes for r in residencies)
    return 100.0 * sum(r.resident_bytes for r in residencies) / total if total else 0.0


def _require_evictable(data: Path | str | Sequence[Path | str]) -> None:
    """Refuse a cold sweep, before its first run, on files that are not the user's: evict()
    leaves those cached (a class's shared images would go cold for every classmate), so the
    "cold" runs would be warm."""
    for path in _paths(data):
        if cache.residency(path).hidden:
            raise LabError(
                f"{public_text(path)} is not yours (in a class, the class's shared copy), so a "
                "cold run cannot evict it without making it cold for everybody who reads it; "
                "run warm (--cache warm), or make images of your own with `python "
                "data_generators/make_images.py --data workspace/my-images --count "
                f"{CLASS_SWEEP_SAMPLES}` and pass that folder with --data"
            )


@contextlib.contextmanager
def sweep_images(images: Path, samples: int = CLASS_SWEEP_SAMPLES) -> Iterator[Path]:
    """The image dataset a cold sweep may evict: `images` itself when working alone; in a
    class, a private copy of its first `samples` samples, made with the options its manifest
    records (byte-identical: each sample depends only on the seed, its size and its index;
    shards up to the same size),
    removed afterwards."""
    from iolab.core.builder import run_generator
    from iolab.core.class_folder import active_class
    from iolab.core.lab_dirs import remove_tree, scratch_dir
    from iolab.core.samples import load_images_manifest

    if active_class() is None:
        yield Path(images)
        return
    shared = load_images_manifest(Path(images))
    samples = min(samples, shared["count"])
    options = {
        "--sample-kb": shared["sample_kb"],
        "--seed": shared["seed"],
        "--shard-mb": shared["shard_mb"],
    }
    folder = scratch_dir("class-images")
    try:
        copy = folder / WorkspaceEntry.IMAGES.dirname
        run_generator(
            "make_images.py",
            copy,
            "--count",
            str(samples),
            *(str(word) for option in options.items() for word in option),
        )
        print(
            f"in a class: the cold and warm runs read your own copy of {samples} "
            "samples, not the shared images (a cold run would evict them for everybody)",
            flush=True,
        )
        yield copy
    finally:
        remove_tree(folder)


def workers_label(workers: int | None) -> str:
    """A worker count as a label: "none" means no DataLoader at all (plain iteration)."""
    return "none" if workers is None else str(workers)


def sweep(
    make_batches: Callable[[int | None], Iterable[Any]],
    data: Path | str | Sequence[Path | str],
    compute_ms: Sequence[float],
    workers: Sequence[int | None],
    steps: int,
    *,
    source: str,
    location: str,
    cache_states: Sequence[str] = CACHE_STATES,
    repeats: int = 1,
    sizer: Callable[[Any], tuple[int, int]] = batch_size,
) -> pd.DataFrame:
    """Simulated training for every compute time x worker count x cache state: one tidy row each.

    With repeats > 1 the whole sweep runs that many times, one pass after the other, so a
    burst of load from other users of a shared machine spoils one repeat of a setting, not
    all of them; summarize with the median (au_plot does).

    `make_batches(workers)` returns a fresh loader over the files below `data` (a DataLoader
    with that many workers, or a plain iterator for None); `data` (one path or several) is
    what is evicted or warmed before each run. The `workers` column holds labels ("none",
    "0", "2", ...). `resident_before_pct` records how much of `data` the page cache held
    when the run started, so a "cold" row that was not cold shows it.
    """
    if repeats < 1:
        raise LabError(f"repeats must be at least 1, not {repeats}")
    repeats = allowed_repeats(repeats)
    if "cold" in cache_states:
        _require_evictable(data)
    rows = []
    for repeat in range(1, repeats + 1):
        for state in cache_states:
            for n_workers in workers:
                for ms in compute_ms:
                    resident = prepare_cache(data, state)
                    run = simulate_training(make_batches(n_workers), ms / 1000, steps, sizer=sizer)
                    rows.append(
                        {
                            "source": source,
                            "location": location,
                            "cache_state": state,
                            "workers": workers_label(n_workers),
                            "compute_ms": ms,
                            "repeat": repeat,
                            "steps": steps,
                            "resident_before_pct": resident,
                            "au_pct": run.au_pct,
                            "wait_total_s": sum(run.wait_s[SKIP_FIRST:]),
                            "samples_per_s": run.samples_per_s,
                            "MBps": run.MBps,
                        }
                    )
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def au_plot(
    frame: pd.DataFrame,
    by: Sequence[str] = ("source", "workers", "cache_state"),
    ax=None,
    title: str | None = None,
):
    """Median AU% against compute time, one line per combination of `by`, with the 90% pass line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    for key, group in frame.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(
            f"{name}={value}" if name == "workers" else str(value)
            for name, value in zip(by, key, strict=True)
        )
        median = group.groupby("compute_ms")["au_pct"].median()
        ax.plot(median.index, median.values, marker="o", label=label)
    ax.axhline(
        PASS_AU_PCT,
        color="red",
        linestyle="--",
        linewidth=1,
        label=f"MLPerf pass line ({PASS_AU_PCT:.0f}%)",
    )
    ax.set_xscale("log")
    ticks = sorted(frame["compute_ms"].unique())
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("compute time per batch (ms, log scale)")
    ax.set_ylabel("accelerator utilization (%)")
    ax.set_ylim(0, 105)
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small", loc="lower right")
    return ax


# --------------------------------------------------------------------------- the data a run reads


def source_dir(dataset_dir: Path, source: str) -> Path:
    """The directory a source reads below a dataset: what a cold run must evict.

    Shards need no data/ or files/ beside them, so only the files source resolves the Dataset.
    """
    if source == "shards":
        return Path(dataset_dir) / SHARDS_DIR
    return Dataset.at(dataset_dir).samples_dir
