"""One file's counts, as one process left them: what the trace reader fills in and the
diagnosis reads. Apart from the reading of strace (trace_tally) so that a record can be built,
merged and checked without a trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

#: Request-size classes (bytes, upper bound exclusive): the lab's own five, on powers of two a
#: learner can read at a glance. They are not Darshan's bins, whose bounds are decimal (100 B,
#: 1 KB, 10 KB, 100 KB, 1 MB, 4 MB, 10 MB, 100 MB, 1 GB); only the 1 MiB bound is shared in
#: spirit (Darshan's 1 MB, Drishti's small-request limit).
SIZE_BINS = (
    (4 * 1024, "<4KiB"),
    (64 * 1024, "4KiB-64KiB"),
    (1024**2, "64KiB-1MiB"),
    (16 * 1024**2, "1MiB-16MiB"),
    (float("inf"), ">=16MiB"),
)
#: A small request, as Darshan's histogram and Drishti count it: under 1 MiB.
SMALL_BYTES = 1024**2
#: The alignment a transfer's offset is checked against: the page size, and a divisor of
#: every Lustre stripe size and GPFS block size (Darshan checks the file system's own).
ALIGNMENT = 4096


def size_class(nbytes: int) -> str:
    """The request-size class of a read or write of `nbytes`."""
    return next(label for bound, label in SIZE_BINS if nbytes < bound)


@dataclass
class FileProfile:
    """Everything one process did to one file (or, merged, every process)."""

    path: str
    opens: int = 0
    lookups: int = 0  # stat, access, readlink: metadata without opening
    reads: int = 0
    writes: int = 0
    seeks: int = 0
    syncs: int = 0  # fsync, fdatasync, sync_file_range, syncfs
    mmaps: int = 0
    other: int = 0  # close, fcntl, getdents, ioctl, ...
    sync_opens: int = 0  # opens with O_SYNC or O_DSYNC: every write waits for the disk
    direct_opens: int = 0  # opens with O_DIRECT: no page cache
    bytes_read: int = 0
    bytes_written: int = 0
    seq_reads: int = 0  # Darshan's: starting at or after the end of the previous read
    seq_writes: int = 0
    random_reads: int = 0  # transfers that go back before the end of the previous one
    random_writes: int = 0
    unaligned: int = 0  # transfers at a known offset that is not a multiple of ALIGNMENT
    max_byte_read: int = 0  # the highest byte read + 1
    max_byte_written: int = 0
    read_time_s: float = 0.0
    write_time_s: float = 0.0
    slowest_read_s: float = 0.0  # the single slowest read, and its size
    slowest_read_bytes: int = 0
    slowest_write_s: float = 0.0
    slowest_write_bytes: int = 0
    sync_time_s: float = 0.0
    meta_time_s: float = 0.0  # opens, lookups, seeks, closes and the other calls
    read_sizes: Counter = field(default_factory=Counter)
    write_sizes: Counter = field(default_factory=Counter)
    _read_end: int | None = None  # where the previous read of this record ended
    _write_end: int | None = None

    @property
    def calls(self) -> int:
        return (
            self.opens
            + self.lookups
            + self.reads
            + self.writes
            + self.seeks
            + self.syncs
            + self.mmaps
            + self.other
        )

    @property
    def io_time_s(self) -> float:
        return self.read_time_s + self.write_time_s + self.sync_time_s + self.meta_time_s

    @property
    def sequential(self) -> int:
        return self.seq_reads + self.seq_writes

    @property
    def random(self) -> int:
        return self.random_reads + self.random_writes

    def reopened(self) -> None:
        """A new open starts a new pass: its first access at 0 is sequential again (reading
        a file twice shows as bytes read beyond its size, not as random access)."""
        self._read_end = self._write_end = None

    def transfer(
        self,
        is_read: bool,
        offset: int | None,
        nbytes: int,
        seconds: float,
        succeeded: bool = True,
        appended: bool = False,
    ) -> None:
        """Count one read or write of `nbytes` at `offset` (None: unknown); an appended
        write is sequential wherever the end of the file was."""
        if is_read:
            self.reads += 1
            self.bytes_read += nbytes
            self.read_time_s += seconds
        else:
            self.writes += 1
            self.bytes_written += nbytes
            self.write_time_s += seconds
        side = "read" if is_read else "write"
        if seconds > getattr(self, f"slowest_{side}_s"):
            setattr(self, f"slowest_{side}_s", seconds)
            setattr(self, f"slowest_{side}_bytes", nbytes)
        if succeeded:  # an empty read at the end is a request too, as in Darshan
            (self.read_sizes if is_read else self.write_sizes)[size_class(nbytes)] += 1
        if offset is None and not appended:
            return
        previous = self._read_end if is_read else self._write_end
        if nbytes <= 0:  # the empty read at the end: a request at an offset, as in Darshan
            if offset is not None and succeeded:
                self._count_order(is_read, offset >= (previous or 0))
            return
        # unless appended, the offset is known here (returned above otherwise)
        self._count_order(is_read, appended or (offset is not None and offset >= (previous or 0)))
        if offset is None:
            return
        self.unaligned += offset % ALIGNMENT != 0
        end = offset + nbytes
        if is_read:
            self._read_end, self.max_byte_read = end, max(self.max_byte_read, end)
        else:
            self._write_end, self.max_byte_written = end, max(self.max_byte_written, end)

    def _count_order(self, is_read: bool, onward: bool) -> None:
        """Darshan's sequential (at or after the previous end) or a step back (random)."""
        if not onward and is_read:
            self.random_reads += 1
        elif not onward:
            self.random_writes += 1
        elif is_read:
            self.seq_reads += 1
        else:
            self.seq_writes += 1

    def add(self, other: FileProfile) -> None:
        """Add another record's counts (of the same file, another process) to this one."""
        for side in ("read", "write"):  # the slowest request, with its own size
            if getattr(other, f"slowest_{side}_s") > getattr(self, f"slowest_{side}_s"):
                for part in ("s", "bytes"):
                    name = f"slowest_{side}_{part}"
                    setattr(self, name, getattr(other, name))
        for item in fields(self):
            name = item.name
            if name == "path" or name.startswith(("_", "slowest_")):
                continue
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, max(mine, theirs) if name.startswith("max_") else mine + theirs)


def per_file(records: Mapping[tuple[str, str], FileProfile]) -> dict[str, FileProfile]:
    """The (file, process) records merged into one profile per file."""
    files: dict[str, FileProfile] = {}
    for (path, _), record in records.items():
        files.setdefault(path, FileProfile(path)).add(record)
    return files
