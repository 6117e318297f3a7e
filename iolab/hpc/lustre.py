"""Is this path on Lustre, and the real `lfs` commands when it is.

Detection asks two independent witnesses: the mount table (the longest mount point holding
the path, type `lustre`) and the statfs magic number the kernel reports (LL_SUPER_MAGIC,
0x0BD00BD0, the test ROMIO uses). Either is enough. The wrappers run `lfs` only on Lustre;
elsewhere they refuse with one sentence, and the lab shows recorded outputs instead (the
parsers live in iolab.hpc.lustre_parse and need no Lustre). Nothing here fakes Lustre.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.hpc.lustre_parse import parse_dir_default, parse_getstripe, parse_lfs_df
from iolab.hpc.stripes import Component, Layout
from iolab.measure.context import mount_for

LL_SUPER_MAGIC = 0x0BD00BD0
#: Stripe sizes must be multiples of 64 KiB (lfs-setstripe(1)).
STRIPE_SIZE_UNIT = 64 * 1024
LFS_TIMEOUT_S = 120.0


def filesystem_type(path: Path | str) -> str:
    """The type of the mount holding `path` (longest mount point), e.g. 'ext4', 'lustre'."""
    return mount_for(path).fs_type


def statfs_magic(path: Path | str) -> int:
    """The f_type magic number statfs(2) gives for `path` (0xef53 ext4, 0x0bd00bd0 Lustre).

    os.statvfs does not expose f_type, so this calls the C library's statfs; f_type is the
    first field of struct statfs (a C long) on Linux.
    """
    libc_name = ctypes.util.find_library("c")
    if not sys.platform.startswith("linux") or libc_name is None:
        raise LabError(
            "statfs magic numbers are read on Linux only: check the file system "
            "type with `df -T` instead"
        )
    libc = ctypes.CDLL(libc_name, use_errno=True)
    buffer = ctypes.create_string_buffer(512)  # larger than struct statfs on any Linux ABI
    if libc.statfs(os.fsencode(str(path)), buffer) != 0:
        error = ctypes.get_errno()
        raise LabError(f"cannot statfs {path}: {os.strerror(error)}; give an existing path")
    return ctypes.c_ulong.from_buffer(buffer).value & 0xFFFFFFFF


def lfs_command() -> str | None:
    """The `lfs` program on PATH, or None (it comes with the Lustre client utilities)."""
    return shutil.which("lfs")


def is_lustre(path: Path | str) -> bool:
    """True when the mount table or the statfs magic says `path` is on Lustre."""
    if filesystem_type(path) == "lustre":
        return True
    try:
        return statfs_magic(path) == LL_SUPER_MAGIC
    except LabError:
        return False


@dataclass(frozen=True)
class LustreStatus:
    """What the lab knows about Lustre at a path, in a form a notebook can print."""

    path: str
    on_lustre: bool
    fs_type: str
    magic_hex: str
    lfs: str | None
    explanation: str

    def frame(self) -> pd.DataFrame:
        """A two-column table (item, value) for a notebook."""
        items = {
            "path": self.path,
            "on_lustre": str(self.on_lustre),
            "fs_type": self.fs_type,
            "statfs_magic": self.magic_hex,
            "lfs": self.lfs or "not found",
            "explanation": self.explanation,
        }
        return pd.DataFrame({"item": list(items), "value": list(items.values())})


def lustre_status(path: Path | str) -> LustreStatus:
    """Whether `path` is on Lustre and `lfs` is present, with one sentence on what to do."""
    path = Path(path)
    fs_type = filesystem_type(path)
    try:
        magic_hex = f"{statfs_magic(path):#x}"
    except LabError:
        magic_hex = "unknown"
    on_lustre = fs_type == "lustre" or magic_hex == f"{LL_SUPER_MAGIC:#x}"
    lfs = lfs_command()
    if not on_lustre:
        explanation = (
            f"{path} is on {fs_type} (statfs magic {magic_hex}), not Lustre: run "
            "this on a cluster's Lustre file system (e.g. in $SCRATCH) to use lfs; "
            "here the lab shows recorded lfs outputs instead."
        )
    elif lfs is None:
        explanation = (
            f"{path} is on Lustre but the lfs command is missing: install the "
            "Lustre client utilities (package lustre-client) or `module load` "
            "them, then try again."
        )
    else:
        explanation = f"{path} is on Lustre and {lfs} can set and show its striping."
    return LustreStatus(str(path), on_lustre, fs_type, magic_hex, lfs, explanation)


def _require_lustre(path: Path) -> str:
    """The lfs program, after checking that `path` (or its directory) is on Lustre."""
    where = path if path.exists() else path.parent
    status = lustre_status(where)
    if not status.on_lustre or status.lfs is None:
        raise LabError(status.explanation)
    return status.lfs


def _run_lfs(argv: list[str]) -> str:
    """Run lfs and return its output, or a LabError quoting its first error line."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=LFS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise LabError(
            f"`{' '.join(argv)}` took over {LFS_TIMEOUT_S:.0f} s: the file "
            "system may be unresponsive; ask the site's support"
        ) from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise LabError(f"`{' '.join(argv)}` failed: {first}")
    return done.stdout


def _whole(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LabError(f"{name} must be a whole number, not {value!r}")
    return value


def _check_size(size: object, name: str = "stripe size") -> int:
    size = _whole(size, name)
    if size <= 0 or size % STRIPE_SIZE_UNIT:
        raise LabError(
            f"{name} {size} is not a positive multiple of 64 KiB (65536 bytes): "
            "use e.g. 1048576 (1 MiB) or 4194304 (4 MiB)"
        )
    return size


def _stripe_options(
    count: object = None,
    size: object = None,
    index: object = None,
    ost_list: Iterable[int] | None = None,
    pool: str | None = None,
) -> list[str]:
    """The -c/-S/-i/-o/-p options of one layout (a whole file or one component)."""
    options: list[str] = []
    if count is not None:
        if _whole(count, "stripe count") < -1:
            raise LabError(
                f"stripe count {count} is below -1: use -1 (all OSTs), 0 (the "
                "file system default) or a positive count"
            )
        options += ["-c", str(count)]
    if size is not None:
        options += ["-S", str(_check_size(size))]
    if index is not None:
        if _whole(index, "OST index") < -1:
            raise LabError(f"OST index {index} is below -1: use -1 to let the MDS choose")
        options += ["-i", str(index)]
    if ost_list is not None:
        osts = [_whole(o, "OST index") for o in ost_list]
        if not osts or min(osts) < 0:
            raise LabError("ost_list must name at least one OST, all indices >= 0")
        if count is not None and count != len(osts):
            raise LabError(
                f"stripe count {count} differs from the {len(osts)} OSTs in "
                "ost_list: give one or make them agree"
            )
        options += ["-o", ",".join(str(o) for o in osts)]
    if pool is not None:
        if not pool or any(c.isspace() for c in pool):
            raise LabError(f"pool name {pool!r} must be a non-empty word")
        options += ["-p", pool]
    return options


def _component_options(components: list) -> list[str]:
    """-E END [options] for each PFL component, checking the ends as lfs would."""
    options: list[str] = []
    previous_end = 0
    for number, spec in enumerate(components, start=1):
        if isinstance(spec, tuple):
            if not 1 <= len(spec) <= 3:
                raise LabError(
                    f"component {number} as a tuple is (end, count, size) or shorter, got {spec!r}"
                )
            # strict=False: a shorter tuple leaves count and size to the defaults.
            spec = dict(zip(("end", "count", "size"), spec, strict=False))
        unknown = set(spec) - {"end", "count", "size", "index", "ost_list", "pool", "layout"}
        if unknown or "end" not in spec:
            raise LabError(
                f"component {number} needs an 'end' and may have count, size, "
                f"index, ost_list, pool or layout='mdt' (got {sorted(spec)})"
            )
        end = spec["end"]
        last = number == len(components)
        if end in (None, -1, "eof", "EOF"):
            if not last:
                raise LabError(
                    f"component {number} runs to EOF but is not the last one: "
                    "only the last component may end at EOF"
                )
            end_text = "-1"
        else:
            end = _whole(end, f"component {number} end")
            if end <= previous_end:
                raise LabError(
                    f"component {number} ends at {end}, not after the previous end "
                    f"{previous_end}: component ends must increase"
                )
            unit = spec.get("size") or STRIPE_SIZE_UNIT
            if end % unit:
                raise LabError(
                    f"component {number} ends at {end}, not a multiple of its "
                    f"stripe size {unit}: round the end to a multiple"
                )
            previous_end, end_text = end, str(end)
        options += ["-E", end_text]
        if spec.get("layout") is not None:
            if spec["layout"] != "mdt" or spec.get("count") is not None:
                raise LabError(
                    f"component {number}: the only layout is 'mdt' (Data-on-MDT), "
                    "and it takes no stripe count"
                )
            options += ["-L", "mdt"]
        options += _stripe_options(
            spec.get("count"),
            spec.get("size"),
            spec.get("index"),
            spec.get("ost_list"),
            spec.get("pool"),
        )
    return options


def setstripe_command(
    path: Path | str,
    *,
    count: int | None = None,
    size: int | None = None,
    index: int | None = None,
    ost_list: Iterable[int] | None = None,
    pool: str | None = None,
    components: list | None = None,
) -> list[str]:
    """The `lfs setstripe` argv for `path`, validated before anything runs.

    `components` makes a PFL layout: a list of dicts (end, count, size, index, ost_list,
    pool, layout='mdt') or (end, count, size) tuples; ends increase, are multiples of
    their stripe size (64 KiB when none is given) and only the last may be EOF (None/-1).
    """
    if components is not None:
        if any(v is not None for v in (count, size, index, ost_list, pool)):
            raise LabError(
                "give either whole-file options (count, size, index, ost_list, "
                "pool) or components, not both"
            )
        if not components:
            raise LabError("components is empty: give at least one component")
        options = _component_options(list(components))
    else:
        options = _stripe_options(count, size, index, ost_list, pool)
        if not options:
            raise LabError("give at least one of count, size, index, ost_list, pool or components")
    return ["lfs", "setstripe", *options, str(path)]


def setstripe(path: Path | str, **options) -> None:
    """Run `lfs setstripe` (see setstripe_command) on a directory or a new, empty file."""
    argv = setstripe_command(path, **options)
    argv[0] = _require_lustre(Path(path))
    _run_lfs(argv)


def getstripe(path: Path | str) -> Layout:
    """The layout of a file, from plain `lfs getstripe` output.

    The plain form is used (not -y) because every client version prints it, down to
    the older ones with a numeric pattern, and the parser reads all its shapes.
    """
    lfs = _require_lustre(Path(path))
    return parse_getstripe(_run_lfs([lfs, "getstripe", str(path)]))


def getstripe_dir_default(path: Path | str) -> Component | Layout:
    """A directory's default layout: a Component, or a Layout when the default is composite."""
    lfs = _require_lustre(Path(path))
    text = _run_lfs([lfs, "getstripe", "-d", str(path)])
    if "lcm_entry_count" in text:
        return parse_getstripe(text)
    return parse_dir_default(text)


def lfs_df(path: Path | str, inodes: bool = False) -> pd.DataFrame:
    """Space (or with inodes=True, inode) use per MDT/OST of the file system holding `path`."""
    lfs = _require_lustre(Path(path))
    return parse_lfs_df(_run_lfs([lfs, "df", *(["-i"] if inodes else []), str(path)]))


def layout_frame(layout: Layout) -> pd.DataFrame:
    """One row per component: byte extent, stripe size and count, pattern and OST list."""
    return pd.DataFrame(
        [
            {
                "component_id": c.component_id if c.component_id is not None else "-",
                "start_bytes": c.start,
                "end_bytes": "EOF" if c.end is None else str(c.end),
                "stripe_size_bytes": c.stripe_size,
                "stripe_count": c.stripe_count,
                "pattern": c.pattern,
                "pool": c.pool or "-",
                "instantiated": c.instantiated,
                "osts": ",".join(str(o) for o in c.osts) if c.osts else "-",
            }
            for c in layout.components
        ]
    )
