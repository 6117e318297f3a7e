"""The simulated training loop, timed by what blocks it.

Training writes nothing for many steps, then the whole model state at once: a burst. While
the save call runs, the accelerator waits, so what matters is how long the loop is
*blocked*, not the storage's average bandwidth. Each step is a sleep (the CPU idles while
an accelerator computes); every M-th step saves, synchronously or with a background copy.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from iolab.core.errors import LabError
from iolab.ml.checkpoint.copies import BackgroundCopier, CopyRecord
from iolab.ml.checkpoint.formats import save_checkpoint
from iolab.ml.checkpoint.resume import checkpoint_name, complete_checkpoints, rotate
from iolab.ml.checkpoint.writing import Saved

Saver = Callable[[dict, Path, bool], Saved]


@dataclass
class LoopRun:
    """One simulated training run: per-step timeline, saves, copies, and what was kept."""

    label: str
    strategy: str
    saved_to: str
    copied_to: str
    fsync: bool
    steps: int
    every: int
    step_s: float
    timeline: pd.DataFrame
    saves: list[Saved]
    copies: list[CopyRecord]
    loop_wall_s: float
    final_wait_s: float
    kept: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict:
        """The run as plain JSON (to show a recorded run where sshfs is missing)."""
        return {
            **{
                name: getattr(self, name)
                for name in (
                    "label",
                    "strategy",
                    "saved_to",
                    "copied_to",
                    "fsync",
                    "steps",
                    "every",
                    "step_s",
                    "loop_wall_s",
                    "final_wait_s",
                    "kept",
                )
            },
            "timeline": self.timeline.to_dict(orient="list"),
            "saves": [{**asdict(s), "path": str(s.path)} for s in self.saves],
            "copies": [asdict(c) for c in self.copies],
        }

    @classmethod
    def from_json_dict(cls, value: dict) -> LoopRun:
        """A run read back from to_json_dict."""
        fields = {
            name: item
            for name, item in value.items()
            if name not in ("timeline", "saves", "copies")
        }
        return cls(
            **fields,
            timeline=pd.DataFrame(value["timeline"]),
            saves=[Saved(**{**s, "path": Path(s["path"])}) for s in value["saves"]],
            copies=[CopyRecord(**c) for c in value["copies"]],
        )


def simulate_step(step_s: float) -> None:
    """One training step: the accelerator computes, this CPU thread only waits for it."""
    time.sleep(step_s)


def train_and_checkpoint(
    state: dict[str, np.ndarray],
    save_dir: Path,
    *,
    steps: int,
    every: int,
    step_s: float,
    fsync: bool = False,
    keep: int = 2,
    copy_to: Path | None = None,
    throttle_MiBps: float | None = None,
    saver: Saver = save_checkpoint,
    label: str = "",
) -> LoopRun:
    """Run `steps` simulated steps, saving after every `every`-th; time what blocks the loop.

    Blocked time is the time inside the save call as the loop sees it: writing (plus, in
    the background strategy, waiting for the previous copy to finish).
    """
    check_loop(steps, every, step_s, keep)
    rows, saves = [], []
    clock_zero = time.perf_counter()
    copier = BackgroundCopier(copy_to, fsync, throttle_MiBps, clock_zero) if copy_to else None
    with copier or contextlib.nullcontext():
        for step in range(1, steps + 1):
            begin = time.perf_counter()
            simulate_step(step_s)
            computed = time.perf_counter()
            waited = written = computed
            name = ""
            if step % every == 0:
                if copier:
                    copier.wait()
                waited = time.perf_counter()
                saved = saver(state, Path(save_dir) / checkpoint_name(step), fsync)
                rotate(save_dir, keep)
                if copier:
                    copier.submit(saved)
                written = time.perf_counter()
                saves.append(saved)
                name = saved.path.name
            rows.append(
                {
                    "step": step,
                    "start_s": begin - clock_zero,
                    "compute_s": computed - begin,
                    "waiting_for_copy_s": waited - computed,
                    "writing_s": written - waited,
                    "blocked_s": written - computed,
                    "checkpoint": name,
                }
            )
        loop_end = time.perf_counter()
    final_wait = time.perf_counter() - loop_end
    strategy = "background" if copy_to else "sync"
    return LoopRun(
        label=label,
        strategy=strategy,
        saved_to=str(save_dir),
        copied_to=str(copy_to) if copy_to else "",
        fsync=fsync,
        steps=steps,
        every=every,
        step_s=step_s,
        timeline=pd.DataFrame(rows),
        saves=saves,
        copies=list(copier.records) if copier else [],
        loop_wall_s=loop_end - clock_zero,
        final_wait_s=final_wait,
        kept=[p.name for p in complete_checkpoints(save_dir)],
    )


def check_loop(steps: int, every: int, step_s: float, keep: int) -> None:
    """Refuse a loop that would write no checkpoint or keep none, in one sentence."""
    if steps < 1 or not 1 <= every <= steps:
        raise LabError(
            f"--steps {steps} with a checkpoint every {every} steps writes no "
            "checkpoint; choose steps >= 1 and 1 <= every <= steps"
        )
    if step_s < 0:
        raise LabError(f"a step cannot take {step_s} s; choose --step-s of 0 or more")
    if keep < 1:
        raise LabError(f"--keep {keep} would delete every checkpoint; keep at least 1")
