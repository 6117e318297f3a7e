"""Checkpoints: exact sizes and hashes, atomic saves, rotation, verified background copies.

Sizes are 1-2 MiB so every test is quick. IOLAB_WORKDIR points at a temporary directory, so
the real workspace is never touched. The one timing assertion compares a copy throttled to
take at least 0.5 s per checkpoint (a sleep guarantees it) with a local 1 MiB write.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from iolab.cli import checkpoint as checkpoint_command
from iolab.core.budget import LIMITS
from iolab.core.errors import LabError, run_cli
from iolab.core.markers import MADE_MARKER
from iolab.ml import checkpoint as ck
from iolab.ml.checkpoint.writing import atomic_write
from iolab.storage.netmount import lab_leftovers

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024**2
needs_sshfs = pytest.mark.needs("sshfs")


@pytest.fixture
def workspace(workspace: Path, login_node: None) -> Path:
    """The test's own workspace (conftest), on a login node: the size budget applies."""
    return workspace


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(workspace: Path) -> list[str]:
    tmp = workspace / "tmp"
    return (
        sorted(str(p.relative_to(workspace)) for p in tmp.rglob("*") if p.name != MADE_MARKER)
        if tmp.exists()
        else []
    )


# --------------------------------------------------------------------------- state and format


def test_model_state_has_the_exact_size_and_is_deterministic():
    state = ck.model_state(2, layers=3, seed=5)
    assert list(state) == ["layer00.weight", "layer01.weight", "layer02.weight"]
    assert [a.size for a in state.values()] == [174762, 174762, 174764]
    assert ck.state_bytes(state) == 2 * MIB
    assert all(a.dtype == np.float32 for a in state.values())
    again = ck.model_state(2, layers=3, seed=5)
    assert all(np.array_equal(state[k], again[k]) for k in state)
    other = ck.model_state(2, layers=3, seed=6)
    assert not np.array_equal(state["layer00.weight"], other["layer00.weight"])


def test_a_saved_checkpoint_has_exact_bytes_its_hash_and_a_sha256sum_sidecar(tmp_path: Path):
    state = ck.model_state(1, layers=4, seed=1)
    saved = ck.save_checkpoint(state, tmp_path / ck.checkpoint_name(12))
    assert saved.path.name == "step-000012.ckpt"
    # one 128-byte .npy header per array, plus the names record: 4 names of 14 UCS-4 chars
    assert saved.size_bytes == saved.path.stat().st_size == MIB + 5 * 128 + 4 * 14 * 4
    assert saved.sha256 == sha256(saved.path)
    assert ck.sidecar(saved.path).read_text() == f"{saved.sha256}  step-000012.ckpt\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-000012.ckpt",
        "step-000012.ckpt.sha256",
    ]
    loaded = ck.load_checkpoint(saved.path)
    assert list(loaded) == list(state)
    assert all(np.array_equal(loaded[k], state[k]) for k in state)
    if shutil.which("sha256sum"):
        proc = subprocess.run(
            ["sha256sum", "-c", "step-000012.ckpt.sha256"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0 and proc.stdout == "step-000012.ckpt: OK\n"


def test_the_same_state_always_gives_the_same_sha256(tmp_path: Path):
    a = ck.save_checkpoint(ck.model_state(1, seed=3), tmp_path / "a.ckpt", fsync=True)
    b = ck.save_checkpoint(ck.model_state(1, seed=3), tmp_path / "b.ckpt")
    assert a.sha256 == b.sha256 and a.size_bytes == b.size_bytes


def test_verify_rejects_a_missing_sidecar_and_a_changed_byte(tmp_path: Path):
    saved = ck.save_checkpoint(ck.model_state(1), tmp_path / ck.checkpoint_name(1))
    assert ck.verify_checkpoint(saved.path)
    data = bytearray(saved.path.read_bytes())
    data[-1] ^= 0xFF
    saved.path.write_bytes(data)
    assert not ck.verify_checkpoint(saved.path)
    ck.sidecar(saved.path).unlink()
    assert not ck.verify_checkpoint(saved.path)
    assert ck.complete_checkpoints(tmp_path) == []


# --------------------------------------------------------------------------- interrupted saves


def test_a_save_that_fails_mid_write_leaves_no_file_that_looks_complete(tmp_path: Path):
    state = ck.model_state(1, layers=2)
    # an object array cannot be saved without pickle: np.save raises after the first layers
    broken = {**state, "optimizer": np.array([object()]), "later": state["layer00.weight"]}
    with pytest.raises(ValueError, match="allow_pickle"):
        ck.save_checkpoint(broken, tmp_path / ck.checkpoint_name(3))
    assert list(tmp_path.iterdir()) == []
    assert ck.complete_checkpoints(tmp_path) == []


def test_ctrl_c_mid_write_leaves_nothing(tmp_path: Path):
    def write_half_then_interrupt(writer):
        writer.write(b"x" * MIB)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "step-000001.ckpt", write_half_then_interrupt, fsync=False)
    assert list(tmp_path.iterdir()) == []


def test_an_earlier_checkpoint_survives_a_failed_overwrite(tmp_path: Path):
    path = tmp_path / ck.checkpoint_name(2)
    first = ck.save_checkpoint(ck.model_state(1, seed=1), path)
    with pytest.raises(ValueError):
        ck.save_checkpoint({"bad": np.array([object()])}, path)
    assert ck.verify_checkpoint(path) and sha256(path) == first.sha256


# --------------------------------------------------------------------------- rotation


def test_rotation_keeps_exactly_the_newest_n(tmp_path: Path):
    state = ck.model_state(1, layers=1)
    for step in (1, 2, 3, 10, 11):
        ck.save_checkpoint(state, tmp_path / ck.checkpoint_name(step))
    removed = ck.rotate(tmp_path, keep=2)
    assert [p.name for p in removed] == ["step-000001.ckpt", "step-000002.ckpt", "step-000003.ckpt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-000010.ckpt",
        "step-000010.ckpt.sha256",
        "step-000011.ckpt",
        "step-000011.ckpt.sha256",
    ]
    with pytest.raises(LabError, match="keep at least 1"):
        ck.rotate(tmp_path, keep=0)


def test_the_training_loop_keeps_the_last_n_and_records_every_step(tmp_path: Path):
    run = ck.train_and_checkpoint(ck.model_state(1), tmp_path, steps=7, every=2, step_s=0.0, keep=2)
    assert [s.path.name for s in run.saves] == [
        "step-000002.ckpt",
        "step-000004.ckpt",
        "step-000006.ckpt",
    ]
    assert run.kept == ["step-000004.ckpt", "step-000006.ckpt"]
    assert list(run.timeline["step"]) == [1, 2, 3, 4, 5, 6, 7]
    assert list(run.timeline["checkpoint"] != "") == [False, True, False, True, False, True, False]
    assert (run.timeline.loc[run.timeline["checkpoint"] == "", "blocked_s"] == 0).all()
    summary = ck.summary_frame([run]).iloc[0]
    assert summary["checkpoints"] == 3 and summary["kept"] == 2 and summary["strategy"] == "sync"


# --------------------------------------------------------------------------- background copies


def test_background_copies_are_verified_by_sha256(tmp_path: Path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    local.mkdir()
    remote.mkdir()
    run = ck.train_and_checkpoint(
        ck.model_state(1, seed=9),
        local,
        steps=6,
        every=2,
        step_s=0.01,
        keep=1,
        copy_to=remote,
        fsync=True,
    )
    names = ["step-000002.ckpt", "step-000004.ckpt", "step-000006.ckpt"]
    assert [c.checkpoint for c in run.copies] == names
    assert all(c.verified for c in run.copies)
    assert run.kept == ["step-000006.ckpt"]
    assert [p.name for p in ck.complete_checkpoints(remote)] == names
    for saved, copy in zip(run.saves, run.copies, strict=True):
        copied = remote / copy.checkpoint
        assert copy.sha256_local == saved.sha256 == sha256(copied)
        assert copy.size_bytes == saved.size_bytes == copied.stat().st_size
        assert ck.verify_checkpoint(copied)
    frame = ck.copies_frame(run)
    assert list(frame["verified"]) == [True, True, True]
    assert ck.summary_frame([run]).iloc[0]["copies_verified"] == 3


def test_a_copy_that_does_not_match_gets_no_sidecar(tmp_path: Path):
    saved = ck.save_checkpoint(ck.model_state(1), tmp_path / ck.checkpoint_name(1))
    wrong = ck.Saved(saved.path, saved.size_bytes, "0" * 64, saved.seconds)
    remote = tmp_path / "remote"
    remote.mkdir()
    record = ck.copy_checkpoint(wrong, remote)
    assert not record.verified
    assert record.sha256_copy == saved.sha256
    assert ck.complete_checkpoints(remote) == []


def test_cancelling_a_background_copy_stops_it_and_leaves_no_partial_file(tmp_path: Path):
    saved = ck.save_checkpoint(ck.model_state(1), tmp_path / ck.checkpoint_name(1))
    remote = tmp_path / "remote"
    remote.mkdir()
    copier = ck.BackgroundCopier(remote, throttle_MiBps=0.1)  # would take 10 s
    copier.submit(saved)
    time.sleep(0.3)
    assert any(remote.iterdir()), "the copy should be under way"
    started = time.perf_counter()
    copier.cancel()
    assert time.perf_counter() - started < 5
    assert list(remote.iterdir()) == [] and copier.records == []
    assert not any(t.name.startswith("copy ") for t in threading.enumerate())


@pytest.mark.slow
def test_background_blocks_the_loop_less_than_the_same_copy_in_the_foreground(tmp_path: Path):
    state = ck.model_state(1)
    rate = 2.0  # MiB/s: each 1 MiB copy takes at least 0.5 s, guaranteed by a sleep

    def save_then_copy_in_the_foreground(state, path, fsync):
        saved = ck.save_checkpoint(state, path, fsync)
        ck.copy_checkpoint(saved, tmp_path / "sync-remote", fsync, throttle_MiBps=rate)
        return saved

    for name in ("sync-local", "sync-remote", "bg-local", "bg-remote"):
        (tmp_path / name).mkdir()
    sync = ck.train_and_checkpoint(
        state,
        tmp_path / "sync-local",
        steps=4,
        every=2,
        step_s=0.8,
        saver=save_then_copy_in_the_foreground,
    )
    background = ck.train_and_checkpoint(
        state,
        tmp_path / "bg-local",
        steps=4,
        every=2,
        step_s=0.8,
        copy_to=tmp_path / "bg-remote",
        throttle_MiBps=rate,
    )
    sync_blocked = sync.timeline["blocked_s"].sum()
    background_blocked = background.timeline["blocked_s"].sum()
    assert sync_blocked >= 2 * 0.5
    assert background_blocked < 0.5 * sync_blocked
    assert all(c.end_s - c.start_s >= 0.5 for c in background.copies)
    assert all(c.verified for c in background.copies)


# --------------------------------------------------------------------------- runs and cleanup


def test_a_run_on_the_local_target_cleans_up_everything(workspace: Path):
    run = ck.run_strategy(ck.model_state(1), "local", steps=3, every=1, step_s=0.0, keep=2)
    assert run.kept == ["step-000002.ckpt", "step-000003.ckpt"]
    assert run.saved_to.startswith("local disk (")
    assert leftovers(workspace) == []


def test_a_directory_target_gets_a_fresh_subdirectory_and_keeps_what_was_there(
    workspace: Path, tmp_path: Path
):
    target = tmp_path / "scratch"
    target.mkdir()
    (target / "mine.txt").write_text("not the lab's\n")
    run = ck.run_strategy(
        ck.model_state(1), str(target), background=True, steps=2, every=1, step_s=0.0, keep=1
    )
    assert [c.verified for c in run.copies] == [True, True]
    assert sorted(p.name for p in target.iterdir()) == ["mine.txt"]
    assert leftovers(workspace) == []


@needs_sshfs
def test_background_copies_over_sshfs_verify_and_leave_nothing(workspace: Path):
    run = ck.run_strategy(
        ck.model_state(1),
        "sshfs",
        background=True,
        fsync=True,
        steps=4,
        every=2,
        step_s=0.05,
        keep=1,
    )
    assert run.copied_to == "sshfs (fuse.sshfs)"
    assert [c.verified for c in run.copies] == [True, True]
    assert [c.size_bytes for c in run.copies] == [s.size_bytes for s in run.saves]
    assert lab_leftovers() == []
    assert leftovers(workspace) == []


@needs_sshfs
def test_a_synchronous_save_over_sshfs_with_fsync_is_complete(workspace: Path):
    run = ck.run_strategy(
        ck.model_state(1), "sshfs", fsync=True, steps=2, every=1, step_s=0.0, keep=1
    )
    assert run.saved_to == "sshfs (fuse.sshfs)" and run.kept == ["step-000002.ckpt"]
    assert lab_leftovers() == []


@pytest.mark.slow
def test_torch_save_is_optional(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(LabError, match="torch is not installed"):
            ck.run_strategy(ck.model_state(1), use_torch=True, steps=1, every=1, step_s=0.0)
        return
    run = ck.run_strategy(ck.model_state(1), use_torch=True, steps=2, every=1, step_s=0.0, keep=1)
    assert run.label.startswith("sync: torch.save")
    assert run.saves[1].size_bytes > MIB
    monkeypatch.setitem(sys.modules, "torch", None)  # as if it were not installed
    with pytest.raises(LabError, match="torch is not installed"):
        ck.import_torch()


# --------------------------------------------------------------------------- bad input


def test_sizes_outside_the_limits_are_refused(login_node, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(LabError, match="at least 1 MiB"):
        ck.checked_size(0)
    with pytest.raises(LabError, match="too big for a shared login node"):
        ck.checked_size(LIMITS["data_mib"].most + 1)
    assert ck.checked_size(LIMITS["data_mib"].most) == LIMITS["data_mib"].most
    assert ck.checked_size(4096, compute_node=True) == 4096


def test_a_batch_job_lifts_the_size_limit(compute_node):
    assert ck.checked_size(4096) == 4096


def test_loops_that_write_nothing_are_refused():
    with pytest.raises(LabError, match="writes no checkpoint"):
        ck.check_loop(steps=3, every=4, step_s=0.1, keep=1)
    with pytest.raises(LabError, match="writes no checkpoint"):
        ck.check_loop(steps=0, every=1, step_s=0.1, keep=1)
    with pytest.raises(LabError, match="--step-s"):
        ck.check_loop(steps=3, every=1, step_s=-1, keep=1)
    with pytest.raises(LabError, match="keep at least 1"):
        ck.check_loop(steps=3, every=1, step_s=0, keep=0)


def test_a_target_that_is_not_writable_is_refused(workspace: Path, tmp_path: Path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(LabError, match="is not a directory"):
        ck.run_strategy(ck.model_state(1), str(a_file), steps=1, every=1, step_s=0.0)
    with pytest.raises(LabError, match="cannot create the directory"):
        ck.run_strategy(ck.model_state(1), "/proc/iolab-checkpoint", steps=1, every=1, step_s=0.0)
    assert leftovers(workspace) == []


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    checkpoint_command.setup_parser(commands)
    return parser.parse_args(["checkpoint", *argv])


def test_cli_prints_the_table_and_one_result(workspace: Path, capsys: pytest.CaptureFixture):
    args = parse(
        "--size-mib",
        "1",
        "--steps",
        "4",
        "--every",
        "2",
        "--step-s",
        "0",
        "--background",
        "--keep",
        "1",
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "blocked_s" in out and "copies_verified" in out
    assert "by 2 checkpoints of 1 MiB; 2 of 2 background copies verified by sha256" in out
    assert leftovers(workspace) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--size-mib", "0"], "at least 1 MiB"),
        (["--size-mib", str(LIMITS["data_mib"].most + 1)], "too big for a shared login node"),
        (["--keep", "0"], "keep at least 1"),
    ],
)
def test_cli_bad_input_is_one_sentence(
    workspace: Path, capsys: pytest.CaptureFixture, argv: list[str], message: str
):
    args = parse(*argv)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: args.func(args))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


CHILD = """
from iolab.ml import checkpoint as ck
from iolab.core.errors import run_cli
run_cli(lambda: ck.run_strategy(ck.model_state(2), "local", background=True, steps=500,
                                every=1, step_s=0.05, keep=1, throttle_MiBps=0.5))
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_cancels_its_copy_and_removes_every_file(
    workspace: Path, sig: signal.Signals
):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IOLAB_WORKDIR": str(workspace)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list((workspace / "tmp").glob("checkpoint-*/target/.step-*.tmp-*")):
            assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
            time.sleep(0.05)
        child.send_signal(sig)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert leftovers(workspace) == []
