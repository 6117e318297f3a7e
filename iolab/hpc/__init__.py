"""Parallel file systems and parallel I/O: Lustre striping and MPI-IO.

Owns: `lfs` status and its parser, the stripe layout model and its plots, the striping
trial and advice, and the MPI-IO runs with their hints. Imports iolab.core, iolab.measure
and iolab.storage; never iolab.ml.
"""
