"""iolab: the measuring toolkit of the storage I/O lab.

Layered packages; each imports only from the packages beneath it (tests/test_layers.py):

    cli       one module per command, the lab runner and the benchmark
    hpc, ml   Lustre and MPI-IO; data pipelines, accelerators, checkpoints
    storage   places to write, fio, sweeps, metadata, hygiene
    measure   timing, system calls, page cache, machine context
    core      workspace, dataset and manifest, samples, shards, errors, tables, budgets

Generators and demos import only iolab.core. See ARCHITECTURE.md.
"""

__version__ = "0.1.0"
