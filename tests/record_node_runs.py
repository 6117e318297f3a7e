"""Record the job scripts' runs across two nodes for the site (`make record-slurm`, as root).

    .venv/bin/python tests/record_node_runs.py reference/node-runs-recorded

Starts the tests' two-node Slurm on this host (tests/slurm_cluster.py: nodes n1 and n2,
each its own host name and node-local disk, one machine under both), submits the four job
scripts of demos/slurm/ unchanged with `sbatch --nodes=2`, and copies what each job copied
back (workspace/slurm-results/<jobid>/) into the folder named, replacing what a previous
recording left there, with machine.json naming the machine. reference/node-runs.ipynb
shows these runs, and a learner's own beside them. The fio profile is scaled down (files x
0.001, 1 s per job) as in the tests: its rates are not shown anyway, since both nodes are
one machine.
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
from pathlib import Path

import slurm_cluster
from slurm_jobs import NODES, job_places, results_of, submit

from iolab.measure.context import machine_context, machine_label

#: The jobs recorded: script, extra sbatch options, extra environment.
JOBS = (
    ("small-files-local.sbatch", (f"--nodes={NODES}", "--ntasks-per-node=2"), {}),
    ("mpiio.sbatch", (f"--nodes={NODES}",), {}),
    ("metadata-storm.sbatch", (f"--nodes={NODES}",), {}),
    (
        "fio-node.sbatch",
        (f"--nodes={NODES}",),
        {"IOLAB_FIO_SIZE_SCALE": "0.001", "IOLAB_FIO_RUNTIME_S": "1"},
    ),
)
#: Large files the page does not read: the dataset's manifest (1.1 MB, a line per file) and
#: fio's full JSON per node and place (about 100 KB each, with latency histograms).
LEFT_OUT = ("manifest.json", "fio-node-*.json")


def record(target: Path) -> None:
    reason = slurm_cluster.multinode_skip_reason()
    if reason:
        raise SystemExit(f"error: cannot record: {reason}")
    recorded = []
    with slurm_cluster.running_cluster(nodes=NODES) as cluster, job_places() as places:
        places["local"] = cluster.root / "local"
        for script, options, env in JOBS:
            print(f"submitting {script} {' '.join(options)}", flush=True)
            job = submit(cluster, script, places, *options, timeout=900, **env)
            if job.state != "COMPLETED":
                raise SystemExit(f"error: {script} ended {job.state}:\n{job.output}")
            recorded.append((script, results_of(places, job)))
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for _script, results in recorded:
            shutil.copytree(
                results, target / results.name, ignore=shutil.ignore_patterns(*LEFT_OUT)
            )
    slurm = subprocess.run(["slurmd", "-V"], capture_output=True, text=True).stdout
    context = machine_context()
    (target / "machine.json").write_text(
        json.dumps(
            {
                "label": machine_label(context),
                "recorded_on": datetime.date.today().isoformat(),
                "slurm": slurm.strip(),
                "nodes": f"{NODES} slurmd on this one machine (tests/slurm_cluster.py)",
            },
            indent=1,
        )
        + "\n"
    )
    print(f"recorded {len(recorded)} jobs in {target}")


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("reference/node-runs-recorded"))
