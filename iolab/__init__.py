"""iolab: the measuring toolkit of the storage I/O lab.

Small modules, one concern each: where the lab may write (workspace), what a dataset must
contain (dataset), how long a command takes (measure), which system calls it makes and on
which files (syscalls), what machine and file system it ran on (context), which system tools
are present (tools), and how results are drawn (plots).
"""

__version__ = "0.1.0"
