"""How many times a measurement repeats: as asked, or at most IOLAB_MAX_REPEATS.

The test run re-executes every notebook (nbval) to prove that each cell runs here and that its
deterministic outputs (counts, bytes, layouts) are still the committed ones; the repeats of a
timing add nothing to that, only minutes. The tests set IOLAB_MAX_REPEATS=1 for the
notebooks' kernels; `make lab`, `make record`, the command line and a learner's own runs
leave it unset and repeat as asked. A table's `repeats` column shows what was done.
"""

from __future__ import annotations

import os

from iolab.core.errors import LabError

MAX_REPEATS_VARIABLE = "IOLAB_MAX_REPEATS"


def allowed_repeats(repeats: int) -> int:
    """`repeats`, or IOLAB_MAX_REPEATS when that is set and smaller."""
    value = os.environ.get(MAX_REPEATS_VARIABLE, "").strip()
    if not value:
        return repeats
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise LabError(
            f"{MAX_REPEATS_VARIABLE}={value!r} is not a whole number of at least 1: "
            f"set it to 1 or more, or unset it to repeat as each measurement asks"
        )
    return min(repeats, int(value))
