"""Writing a file whole or not at all.

A result, a manifest or a bookkeeping file written in place is half written when the run is
interrupted or the disk fills, and a reader then finds half of it. Writers here write beside
the file and rename it into place, so a reader finds the previous file or the new one. It
needs nothing of the workspace, so a reader demo that saves what it read (--order-out)
imports it without the workspace, its class folder and its markers.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from iolab.core.errors import LabError


@contextlib.contextmanager
def atomic_output(path: Path | str) -> Iterator[Path]:
    """A temporary name beside `path` to write to; renamed to `path` only if the block succeeds.

    An interrupted or failed write leaves the previous file (or none), never half a result.
    The temporary name keeps the suffix, so writers that choose a format by it still work.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:8]}.partial{path.suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as err:
        raise LabError(
            f"cannot write {path} ({err.strerror or err}); check that its folder is "
            "writable and has room"
        ) from None
    finally:
        temporary.unlink(missing_ok=True)


def replace_json(path: Path, value: dict, indent: int) -> None:
    """Write `value` as JSON to `path` by way of `<path>.partial` and a rename, so a reader finds
    the previous file or the new one, never half of one. The indent is the format's own."""
    partial = path.with_name(path.name + ".partial")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()  # a killed run's: the callers hold the folder's writer lock
    # Created afresh, never written through a link planted under the partial's name.
    fd = os.open(
        partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(value, indent=indent))
    os.replace(partial, path)
