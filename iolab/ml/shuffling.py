"""Sample orders a training loop can see, and how random they really are.

Three ways to "shuffle" a dataset stored in shards, from cheap to thorough:

- shard shuffle: shards in random order, samples inside each shard in stored order;
- buffer shuffle: samples stream through a buffer of N and leave it in random order
  (webdataset's `.shuffle(N)`); a sample can only move about N places, so a small buffer
  keeps neighbours (e.g. consecutive days) together;
- full permutation: any sample can be at any position; needs random access (one file per
  sample, or an offset index).

The orders come from webdataset itself where it defines them (shard and buffer shuffle use
webdataset.filters.shuffle with the same seed), so what is plotted is what a pipeline does.
`EpochSampler` gives a full permutation per epoch with a resumable position, so a job that is
restarted from a checkpoint repeats nothing and skips nothing.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import TypeVar

import pandas as pd

from iolab.core.errors import LabError

T = TypeVar("T")

#: webdataset's default: the buffer starts yielding once it holds this many samples.
WDS_INITIAL = 100


def full_permutation(n: int, seed: int) -> list[int]:
    """A uniformly random order of 0..n-1, the same for the same seed."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def buffer_shuffle_order(
    items: Sequence[T], buffer_size: int, seed: int, initial: int | None = None
) -> list[T]:
    """`items` as webdataset's shuffle buffer of `buffer_size` emits them for `seed`.

    `initial` is how full the buffer gets before it starts yielding (webdataset's default
    min(100, buffer_size)); until the stream ends the buffer refills one sample per sample out.
    """
    if buffer_size < 1:
        return list(items)
    from webdataset import filters  # imports torch when installed: only when needed

    start = min(WDS_INITIAL if initial is None else initial, buffer_size)
    return list(filters.shuffle(buffer_size, initial=start, seed=seed)(iter(items)))


def shard_shuffle_order(
    shard_sizes: Sequence[int], seed: int, shardshuffle: int = 100
) -> list[int]:
    """Source indices in the order read when the shards (of these sizes) are shuffled.

    Reproduces `WebDataset(..., shardshuffle=shardshuffle, seed=seed)` in one process:
    webdataset shuffles the shard list with a buffer of `shardshuffle`, then reads each
    shard from start to end.
    """
    starts = [0, *accumulate(shard_sizes)]
    order = buffer_shuffle_order(range(len(shard_sizes)), shardshuffle, seed)
    return [i for shard in order for i in range(starts[shard], starts[shard + 1])]


def shuffle_orders(shard_sizes: Sequence[int], buffer_size: int, seed: int) -> pd.DataFrame:
    """Tidy frame for a plot: position vs source index for the three ways to shuffle.

    Columns: method, position, source_index, displacement_samples (|position - source_index|),
    shard (the shard the sample is stored in).
    """
    n = sum(shard_sizes)
    shard_of = [s for s, size in enumerate(shard_sizes) for _ in range(size)]
    orders = {
        "shard shuffle": shard_shuffle_order(shard_sizes, seed),
        f"buffer shuffle ({buffer_size})": buffer_shuffle_order(range(n), buffer_size, seed),
        "full permutation": full_permutation(n, seed),
    }
    frames = [
        pd.DataFrame({"method": method, "position": range(n), "source_index": order})
        for method, order in orders.items()
    ]
    frame = pd.concat(frames, ignore_index=True)
    frame["displacement_samples"] = (frame["position"] - frame["source_index"]).abs()
    frame["shard"] = [shard_of[i] for i in frame["source_index"]]
    return frame


def locality_summary(orders: pd.DataFrame, window_samples: int) -> pd.DataFrame:
    """How local each order stays: displacement, and distinct shards per window (e.g. a batch).

    A well-shuffled batch of K samples from S shards draws on about min(K, S) shards; a batch
    from a small buffer or a shard shuffle draws on one or two.
    """
    rows = []
    for method, group in orders.groupby("method", sort=False):
        shards = group["shard"].tolist()
        windows = [
            len(set(shards[i : i + window_samples])) for i in range(0, len(shards), window_samples)
        ]
        rows.append(
            {
                "method": method,
                "median_displacement_samples": float(group["displacement_samples"].median()),
                "max_displacement_samples": int(group["displacement_samples"].max()),
                "window_samples": window_samples,
                "mean_shards_per_window": sum(windows) / len(windows),
            }
        )
    return pd.DataFrame(rows)


class EpochSampler:
    """A full random permutation per epoch, resumable from a checkpointed position.

    The epoch's order depends only on (seed + epoch), as in torch's DistributedSampler and
    webdataset's detshuffle, so after a restart the same order is rebuilt and reading
    continues at `position`: nothing is repeated, nothing skipped. Iterating yields the
    remaining indices and advances the position as each index is handed out; with DataLoader
    workers indices are fetched ahead, so save the number of samples the training loop has
    actually consumed (`state_dict(position=consumed)`).
    """

    def __init__(self, n: int, seed: int = 0, epoch: int = 0) -> None:
        if n < 0:
            raise LabError(f"a sampler needs a sample count of 0 or more, not {n}")
        self.n, self.seed, self.epoch, self.position = n, seed, epoch, 0
        self._order: list[int] | None = None

    def permutation(self) -> list[int]:
        """This epoch's whole order (the same for the same seed and epoch)."""
        if self._order is None:
            self._order = full_permutation(self.n, self.seed + self.epoch)
        return self._order

    def set_epoch(self, epoch: int) -> None:
        """Start epoch `epoch` from its beginning."""
        self.epoch, self.position, self._order = epoch, 0, None

    def __iter__(self) -> Iterator[int]:
        order = self.permutation()
        while self.position < self.n:
            self.position += 1
            yield order[self.position - 1]

    def __len__(self) -> int:
        """Samples left in this epoch."""
        return self.n - self.position

    def state_dict(self, position: int | None = None) -> dict:
        """What to save in a checkpoint: n, seed, epoch and the position reached."""
        return {
            "n": self.n,
            "seed": self.seed,
            "epoch": self.epoch,
            "position": self.position if position is None else position,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue where a saved state left off; refuses a state of another dataset or seed."""
        if state.get("n") != self.n or state.get("seed") != self.seed:
            raise LabError(
                f"the saved sampler state is for {state.get('n')} samples with seed "
                f"{state.get('seed')}, not {self.n} with seed {self.seed}; resume with the same "
                "dataset and seed"
            )
        if not 0 <= state["position"] <= self.n:
            raise LabError(f"the saved sampler position {state['position']} is outside 0..{self.n}")
        self.set_epoch(state["epoch"])
        self.position = state["position"]
