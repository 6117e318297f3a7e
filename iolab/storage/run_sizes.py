"""File sizes as a learner writes them (4K, 64M), and the sizes and counts the sweep and
mdrates take by default and at most: apart from those runs (iolab.storage.sweep and
iolab.storage.mdrates need pandas), so that checking their options imports no heavy package.
"""

from __future__ import annotations

import re

from iolab.core.errors import LabError

KIB = 1024
MIB = 1024**2
GIB = 1024**3
#: The sweep's smallest and largest file size.
DEFAULT_MIN_BYTES = 4 * KIB
DEFAULT_MAX_BYTES = 64 * MIB
#: Files each mdrates process creates, stats, reads and removes.
DEFAULT_FILES_PER_PROCESS = 1000
#: mdrates is about metadata; larger files belong to the sweep (iolab.storage.sweep).
MAX_FILE_BYTES = 1024**2
_SIZE = re.compile(r"^\s*(\d+)\s*(?:([KMG])(?:I?B)?|B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": KIB, "M": MIB, "G": GIB}


def parse_size(text: str) -> int:
    """Bytes from '4K', '64MiB', '1G' or '4096': binary units, as fio and elbencho read them."""
    match = _SIZE.match(text)
    if match is None:
        raise LabError(f"cannot read the size {text!r}; write it like 4K, 64M, 1G or 4096 (bytes)")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").upper()]
