"""Shuffle orders match webdataset's, their locality is what the lesson shows, resume is exact."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest
from conftest import build_dataset, run_script

from iolab.core import loader, shards
from iolab.core.errors import LabError
from iolab.ml import shuffling as sf

SIZES = [10, 10, 10, 7]  # the 37-sample shard set of the fixture below


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("shuffle") / "dataset"
    build_dataset(data, 37, 7, archive=False)
    run_script("data_generators/make_shards.py", "--data", data, "--samples-per-shard", 10)
    return data


def keys_in_order(data: Path) -> list[str]:
    return [key for key, _ in loader.file_samples(data)]


def test_shard_sizes_of_fixture(sharded: Path) -> None:
    assert [e["samples"] for e in shards.load_shard_index(sharded / "shards")["shards"]] == SIZES


@pytest.mark.slow
def test_buffer_order_is_webdatasets_order(sharded: Path) -> None:
    keys = keys_in_order(sharded)
    read = [key for key, _ in loader.shard_samples(sharded, buffer_size=8, seed=3)]
    assert read == sf.buffer_shuffle_order(keys, 8, seed=3)
    assert read != keys and sorted(read) == keys


def test_shard_order_is_webdatasets_order(sharded: Path) -> None:
    keys = keys_in_order(sharded)
    read = [key for key, _ in loader.shard_samples(sharded, shardshuffle=100, seed=5)]
    assert read == [keys[i] for i in sf.shard_shuffle_order(SIZES, seed=5)]
    assert sorted(read) == keys


def test_full_permutation_is_a_seeded_permutation() -> None:
    order = sf.full_permutation(1000, seed=2)
    assert sorted(order) == list(range(1000))
    assert order == sf.full_permutation(1000, seed=2) != sf.full_permutation(1000, seed=3)


def test_locality_numbers_for_a_seed() -> None:
    """The lesson's claim in numbers: a batch of 8 from a buffer of 4 draws on 2 of 4 shards."""
    summary = sf.locality_summary(sf.shuffle_orders(SIZES, buffer_size=4, seed=1), window_samples=8)
    assert summary.to_dict("records") == [
        {
            "method": "shard shuffle",
            "median_displacement_samples": 10.0,
            "max_displacement_samples": 20,
            "window_samples": 8,
            "mean_shards_per_window": 1.6,
        },
        {
            "method": "buffer shuffle (4)",
            "median_displacement_samples": 3.0,
            "max_displacement_samples": 11,
            "window_samples": 8,
            "mean_shards_per_window": 2.2,
        },
        {
            "method": "full permutation",
            "median_displacement_samples": 11.0,
            "max_displacement_samples": 34,
            "window_samples": 8,
            "mean_shards_per_window": 3.4,
        },
    ]


def test_a_buffer_never_moves_a_sample_earlier_than_its_size() -> None:
    orders = sf.shuffle_orders([1000] * 7 + [300], buffer_size=10, seed=1)
    buffered = orders[orders["method"] == "buffer shuffle (10)"]
    assert (buffered["position"] - buffered["source_index"]).min() >= -10
    assert sorted(buffered["source_index"]) == list(range(7300))


@pytest.mark.parametrize("stop", [0, 1, 17, 36, 37])
def test_resumed_epoch_repeats_nothing_and_skips_nothing(stop: int) -> None:
    sampler = sf.EpochSampler(37, seed=4, epoch=2)
    before = list(islice(sampler, stop))
    state = sampler.state_dict()
    assert state == {"n": 37, "seed": 4, "epoch": 2, "position": stop}
    resumed = sf.EpochSampler(37, seed=4)
    resumed.load_state_dict(state)
    after = list(resumed)
    assert before + after == sf.EpochSampler(37, seed=4, epoch=2).permutation()
    assert sorted(before + after) == list(range(37))
    assert len(resumed) == 0


def test_epochs_differ_and_foreign_state_is_refused() -> None:
    sampler = sf.EpochSampler(50, seed=1)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first
    with pytest.raises(LabError, match="same dataset and seed"):
        sf.EpochSampler(50, seed=2).load_state_dict(sampler.state_dict())


def test_sampler_drives_the_file_reader(sharded: Path) -> None:
    keys = keys_in_order(sharded)
    sampler = sf.EpochSampler(len(keys), seed=9)
    read = [
        key
        for batch in loader.batches(sharded, "files", sampler=sampler, batch_size=5)
        for key, _ in batch
    ]
    assert read == [keys[i] for i in sf.EpochSampler(len(keys), seed=9).permutation()]
    with pytest.raises(LabError, match="random access"):
        loader.batches(sharded, "shards", sampler=sampler)
