"""The floor everything stands on, and the only part of iolab that generators and demos import.

Owns: the workspace and its layout (where the lab may write, what it made, how `clean`
finds it), the dataset and its manifest (written and read in one module), the Dataset
value, samples and shards, reading them as a training loop does (loader), the one dataset
builder, errors and interrupts, result tables, and the login-node budget. Standard library
and pandas only (torch and webdataset only inside the loader's functions); imports nothing
else from iolab.
"""
