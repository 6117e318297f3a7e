"""How big a checkpoint may be here: the login-node budget (iolab.core.budget) decides.

A run holds the whole model state in memory and writes it a few times, so on a login node
shared by many users its size counts against the budget's data limit; inside a batch job
the node is the user's own.
"""

from __future__ import annotations

from iolab.core import budget
from iolab.core.errors import LabError


def checked_size(size_mib: int, compute_node: bool | None = None) -> int:
    """The size in MiB if it is allowed here, else a LabError with the fix."""
    if size_mib < 1:
        raise LabError(
            f"a checkpoint of {size_mib} MiB holds nothing; choose a size of at "
            "least 1 MiB (--size-mib)"
        )
    budget.check(
        f"a checkpoint of {size_mib} MiB",
        data_mib=size_mib,
        fix="choose a smaller --size-mib",
        compute_node=compute_node,
    )
    return size_mib
