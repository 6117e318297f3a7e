"""Published MLPerf Storage figures to set beside the simulated accelerator's own numbers.

A reader's checkout has no copy of the material the lab was built from, so the few rows the
DataLoader lesson quotes live here, each with its source. Two kinds:

* what one emulated accelerator needs (derived from the MLPerf Storage v2.0 workload
  configurations: batch x record size x pass AU / compute time per step), and
* what real storage delivered to one emulated GPU running MLPerf Storage's UNet3D workload
  in the MOC/NERC storage benchmarks (Ceph and Weka volumes on Kubernetes, a node-local
  volume, and, run elsewhere for reference, a laptop's NVMe drive).
"""

from __future__ import annotations

import pandas as pd

from iolab.ml.accelerator import needed_MBps

MLPERF_SOURCE = "derived from MLPerf Storage v2.0 workload configs"
NERC_SOURCE = (
    "MOC/NERC storage benchmarks: MLPerf Storage UNet3D, 1 emulated GPU "
    "(CCI-MOC/storage-benchmarks@56ae298, results/)"
)

#: workload, samples per batch, record size (MB), compute s per step on H100 and A100, pass AU.
_WORKLOADS = [
    ("UNet3D", 7, 146.6, 0.323, 0.636, 0.90),
    ("ResNet-50", 400, 0.1147, 0.224, 0.435, 0.90),
    ("CosmoFlow", 1, 2.83, 0.0035, 0.00551, 0.70),
]

#: emulated GPU, samples, storage, AU %, MB/s delivered.
_NERC_RUNS = [
    ("A100", 3500, "NESE Ceph PVC", 10.81, 165.35),
    ("H100", 3500, "NESE Ceph PVC", 5.58, 168.05),
    ("A100", 1000, "Local EmptyDir PVC", 24.51, 729.10),
    ("A100", 1000, "Weka PVC", 58.08, 871.68),
    ("A100", 1200, "Macbook Pro 14in NVMe", 99.16, 1495.76),
]


def bandwidth_per_accelerator() -> pd.DataFrame:
    """MB/s one emulated H100 / A100 must receive to reach the pass AU, per workload."""
    rows = []
    for workload, batch, record_MB, h100_s, a100_s, au in _WORKLOADS:
        rows.append(
            {
                "workload": workload,
                "batch_samples": batch,
                "record_MB": record_MB,
                "compute_H100_s": h100_s,
                "compute_A100_s": a100_s,
                "pass_au_pct": 100 * au,
                "needed_H100_MBps": needed_MBps(batch, record_MB, h100_s, au),
                "needed_A100_MBps": needed_MBps(batch, record_MB, a100_s, au),
                "source": MLPERF_SOURCE,
            }
        )
    return pd.DataFrame(rows)


def nerc_runs() -> pd.DataFrame:
    """AU and MB/s that MLPerf Storage (UNet3D) measured on real storage in the NERC study."""
    return pd.DataFrame(
        [
            {
                "emulated_gpu": gpu,
                "samples": samples,
                "storage": storage,
                "au_pct": au,
                "MBps": mbps,
                "source": NERC_SOURCE,
            }
            for gpu, samples, storage, au, mbps in _NERC_RUNS
        ]
    )
