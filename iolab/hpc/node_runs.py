"""What the job scripts of demos/slurm/ found, gathered per node and in total.

Every job copies its results back to `workspace/slurm-results/<jobid>/`: `job.json` (the
script, its nodes and tasks, and how many machines were under those nodes), `status`
(COMPLETED, or FAILED and the exit code) and the script's own tables. This module reads
the completed ones back, so that a notebook can show a learner's own runs on a cluster
beside the recorded ones, and `python -m iolab node-runs` can list them.

Counts (files opened, created, statted; ranks; aggregators) are exact on any machine. Times
and rates are facts of a cluster only when its nodes are separate machines: nodes that
share one (several slurmd on one host, as in the lab's tests, seen as one kernel boot id)
share its disk, cache and cores, so `shares_one_machine` runs have their rates left out.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError

#: The job scripts whose results this module reads, by the name job.json gives them.
SCRIPTS = ("small-files-local", "mpiio", "metadata-storm", "fio-node")
MPIIO_MODES = ("independent", "collective", "file-per-process")
#: Columns that are times or rates: left out where the nodes share one machine.
TIMED = ("copy_s", "unpack_s", "create_s", "stat_s", "remove_s", "bw_MiB_per_s", "iops")


@dataclass(frozen=True)
class NodeRun:
    """One completed job: where its results are and what job.json says about it."""

    path: Path
    job_id: str
    script: str
    cluster: str
    nodes: tuple[str, ...]
    tasks: int
    machines: int | None

    @property
    def shares_one_machine(self) -> bool:
        """Several nodes on one machine: their times and rates are not a cluster's."""
        return len(self.nodes) > 1 and self.machines == 1

    @property
    def label(self) -> str:
        nodes = len(self.nodes)
        where = (
            f"{nodes} nodes on one machine"
            if self.shares_one_machine
            else f"{nodes} node{'s' * (nodes > 1)}"
        )
        return f"job {self.job_id} on {self.cluster} ({where}: {' '.join(self.nodes)})"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise LabError(
            f"{path} is not the JSON the job scripts write ({err}); delete "
            f"{path.parent} or run the job again"
        ) from None


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise LabError(
            f"{path} is not the table the job scripts write ({err}); delete "
            f"{path.parent} or run the job again"
        ) from None


def completed_runs(results_root: Path) -> list[NodeRun]:
    """The completed jobs under `results_root`, oldest first (by job id where numeric)."""
    runs: list[NodeRun] = []
    if not results_root.is_dir():
        return runs
    for folder in results_root.iterdir():
        status, facts = folder / "status", folder / "job.json"
        if not (folder.is_dir() and status.is_file() and facts.is_file()):
            continue
        try:
            finished = status.read_text().split()[:1] == ["COMPLETED"]
        except (OSError, UnicodeDecodeError) as err:
            raise LabError(
                f"cannot read {status} ({err}); delete {folder} or run the job again"
            ) from None
        if not finished:
            continue
        job = _read_json(facts)
        try:
            runs.append(
                NodeRun(
                    folder,
                    str(job["job_id"]),
                    job["script"],
                    job["cluster"],
                    tuple(job["nodes"]),
                    int(job["tasks"]),
                    job.get("machines"),
                )
            )
        except (KeyError, TypeError, ValueError):
            raise LabError(
                f"{facts} lacks what the job scripts write (job_id, script, "
                f"cluster, nodes, tasks); delete {folder}"
            ) from None
    return sorted(
        runs,
        key=lambda run: (
            not run.job_id.isdigit(),
            int(run.job_id) if run.job_id.isdigit() else 0,
            run.job_id,
        ),
    )


def latest(runs: list[NodeRun], script: str, min_nodes: int = 1) -> NodeRun | None:
    """The newest completed run of `script` on at least `min_nodes` nodes, or None."""
    chosen = [run for run in runs if run.script == script and len(run.nodes) >= min_nodes]
    return chosen[-1] if chosen else None


def _with_total(frame: pd.DataFrame, key: str, summed: list[str]) -> pd.DataFrame:
    total = {column: frame[column].sum() for column in summed}
    return pd.concat([frame, pd.DataFrame([{key: "total", **total}])], ignore_index=True)


def _untimed(run: NodeRun, frame: pd.DataFrame) -> pd.DataFrame:
    if not run.shares_one_machine:
        return frame
    return frame.drop(columns=[c for c in TIMED if c in frame.columns])


def stage_in_table(run: NodeRun) -> pd.DataFrame:
    """small-files-local: per node, the stage-in's counts, and their total."""
    frame = _read_csv(run.path / "stage-in-per-node.csv")
    counts = [
        "tasks",
        "stage_ins",
        "shared_files_opened",
        "shared_bytes_read",
        "local_files_created",
        "files_read_locally",
    ]
    return _untimed(run, _with_total(frame, "node", counts))


def stage_in_saving(run: NodeRun) -> dict[str, int]:
    """Files opened on the shared place: staged once per node, against every task reading
    the shared copy (the dataset's file count per task)."""
    frame = _read_csv(run.path / "stage-in-per-node.csv")
    # the dataset's file count, as the job's reading of the shared copy found it (the job
    # fails unless that matches the manifest)
    readings = _read_csv(run.path / "readings.csv")
    files = int(readings.loc[readings["location"] == "shared", "files"].iloc[0])
    return {
        "nodes": len(frame),
        "tasks": int(frame["tasks"].sum()),
        "shared_opens_staged": int(frame["shared_files_opened"].sum()),
        "shared_opens_per_task": int(frame["tasks"].sum()) * files,
        "files_per_task": files,
    }


def mpiio_table(run: NodeRun) -> pd.DataFrame:
    """mpiio: per mode, the ranks per node, the hints in effect and the aggregators."""
    rows = []
    for mode in MPIIO_MODES:
        result = _read_json(run.path / f"mpiio-{mode}.json")
        hosts = result["hosts"]
        hints = result["hints"]
        rows.append(
            {
                "mode": mode,
                "ranks": result["ranks"],
                "ranks_per_node": ", ".join(f"{h}: {n}" for h, n in Counter(hosts).items()),
                "cb_config_list": hints.get("cb_config_list", ""),
                "cb_nodes": hints.get("cb_nodes", ""),
                "aggregators": " ".join(
                    f"{rank} ({hosts[rank]})" for rank in result["aggregators"]
                ),
                "bytes_written": result["bytes_written"],
                "verified": result["verified"],
            }
        )
    return pd.DataFrame(rows)


def storm_table(run: NodeRun) -> pd.DataFrame:
    """metadata-storm: per node, the files created, statted and removed at once, and the total."""
    frame = _read_csv(run.path / "metadata-storm-per-node.csv")
    return _untimed(run, _with_total(frame, "node", ["tasks", "files_created", "stats", "removes"]))


def fio_tables(run: NodeRun) -> tuple[pd.DataFrame, pd.DataFrame]:
    """fio-node: the per-node table and the sum over nodes (rates only from real nodes)."""
    per_node = _read_csv(run.path / "fio-per-node.csv")
    total = _read_csv(run.path / "fio-total.csv")
    return _untimed(run, per_node), _untimed(run, total)
