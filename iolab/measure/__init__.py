"""How a command is measured: wall time, system calls and on which files, cache residency.

Owns: timing (repeats, cold/warm), the strace parser and the attribution of calls to the
dataset's files, the audit-hook fallback, page-cache residency and eviction, the machine
context every measurement carries, which tools are present, recorded fallbacks, the
readers as a table of commands, and the lab's plot colours. Imports only iolab.core.
"""
