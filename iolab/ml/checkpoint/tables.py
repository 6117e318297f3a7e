"""Tables of measured runs: how long each loop was blocked, and what its copies cost and proved."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from iolab.ml.checkpoint.loop import LoopRun
from iolab.ml.checkpoint.state import MIB


def summary_frame(runs: Sequence[LoopRun]) -> pd.DataFrame:
    """One row per run: how long the loop was blocked, and what the copies cost and proved."""
    rows = []
    for run in runs:
        size = run.saves[0].size_bytes if run.saves else 0
        writing = run.timeline.loc[run.timeline["checkpoint"] != "", "writing_s"]
        copy_s = [c.end_s - c.start_s for c in run.copies]
        rows.append(
            {
                "label": run.label,
                "strategy": run.strategy,
                "saved_to": run.saved_to,
                "copied_to": run.copied_to,
                "fsync": run.fsync,
                "size_MiB": round(size / MIB, 2),
                "checkpoints": len(run.saves),
                "steps": run.steps,
                "compute_s": run.timeline["compute_s"].sum(),
                "blocked_s": run.timeline["blocked_s"].sum(),
                "blocked_per_checkpoint_s": run.timeline["blocked_s"].sum()
                / max(len(run.saves), 1),
                "write_MiBps": size / MIB / writing.median() if len(writing) else float("nan"),
                "loop_wall_s": run.loop_wall_s,
                "copy_median_s": float(np.median(copy_s)) if copy_s else float("nan"),
                "final_wait_s": run.final_wait_s if run.copies else float("nan"),
                "copies_verified": sum(c.verified for c in run.copies),
                "kept": len(run.kept),
            }
        )
    return pd.DataFrame(rows)


def copies_frame(run: LoopRun) -> pd.DataFrame:
    """One row per background copy: when it ran, its size, and both hashes."""
    return pd.DataFrame(
        [
            {
                "checkpoint": c.checkpoint,
                "size_bytes": c.size_bytes,
                "start_s": c.start_s,
                "end_s": c.end_s,
                "copy_s": c.end_s - c.start_s,
                "sha256_local": c.sha256_local,
                "sha256_copy": c.sha256_copy,
                "verified": c.verified,
            }
            for c in run.copies
        ]
    )
