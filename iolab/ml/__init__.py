"""Storage as an ML workload sees it: data pipelines, shuffling, the accelerator, checkpoints.

Owns: measuring the sample pipeline (iolab.core.loader reads the samples), shuffling
strategies, how fast an accelerator must be fed (with the MLPerf reference figures), and
checkpoint writing, timing and resuming. Imports iolab.core, iolab.measure and
iolab.storage; never iolab.hpc.
"""
