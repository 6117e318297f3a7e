"""Pictures of the job scripts' results per node (iolab.hpc.node_runs), for a learner's own
runs on separate nodes: the spread between nodes is easier to see than to read."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def fio_per_node_bars(per_node: pd.DataFrame) -> plt.Figure:
    """One panel per location: each fio job's bandwidth, one bar per node side by side."""
    locations = list(dict.fromkeys(per_node["location"]))
    nodes = list(dict.fromkeys(per_node["node"]))
    jobs = list(dict.fromkeys(per_node["job"]))
    fig, axes = plt.subplots(
        1, len(locations), figsize=(6.4 * len(locations), 3.2), squeeze=False, sharey=True
    )
    width = 0.8 / len(nodes)
    for ax, location in zip(axes[0], locations, strict=True):
        rows = per_node[per_node["location"] == location].set_index(["job", "node"])
        for k, node in enumerate(nodes):
            values = [rows["bw_MiB_per_s"].get((job, node), np.nan) for job in jobs]
            ax.bar(np.arange(len(jobs)) + k * width, values, width, label=node)
        ax.set_xticks(np.arange(len(jobs)) + width * (len(nodes) - 1) / 2, jobs, rotation=30)
        ax.set_title(location)
        ax.set_ylabel("bandwidth (MiB/s)")
    axes[0][-1].legend(title="node", fontsize="small")
    fig.suptitle("fio node profile on every node at once")
    fig.tight_layout()
    return fig
