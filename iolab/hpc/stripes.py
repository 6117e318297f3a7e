"""Lustre file layouts as data, and the exact arithmetic of where each byte lives.

A Lustre file is cut into stripe-size pieces dealt round-robin over the OST objects listed by
`lfs getstripe` (the obdidx column, in that order: only the first equals lmm_stripe_offset,
the MDS picks the rest). A composite (PFL) layout is a list of such RAID0 layouts, each for
an absolute byte range of the file. The parsers in iolab.hpc.lustre produce these types; the
model below answers which OST and object offset hold a byte, which OSTs a range touches, and
how P writers share the OSTs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from iolab.core.errors import LabError

#: `lcme_extent.e_end: EOF`: a component that runs to the end of the file.
EOF = None


@dataclass(frozen=True)
class Component:
    """One RAID0 layout covering file bytes [start, end) (end None: to the end of the file)."""

    start: int
    end: int | None
    stripe_size: int
    stripe_count: int
    #: OST indices in `lfs getstripe` obdidx order; () while the component is not instantiated.
    osts: tuple[int, ...] = ()
    #: 'raid0', 'mdt' (Data-on-MDT), 'released', ...; older clients' numeric 1 becomes 'raid0'.
    pattern: str = "raid0"
    #: lmm_stripe_offset: the first OST, -1 when the MDS chose it.
    stripe_offset: int = -1
    pool: str | None = None
    #: lcme_flags contains 'init': objects exist and `osts` is known.
    instantiated: bool = True
    component_id: int | None = None
    #: lmm_extension_size of a self-extending (SEL, `lcme_flags: extension`) placeholder:
    #: it holds no stripes of its own (stripe_size 0) and grows the component before it.
    extension_size: int | None = None


@dataclass(frozen=True)
class Layout:
    """A file's layout: one component for a plain file, several (by offset) for PFL."""

    components: tuple[Component, ...]
    path: str | None = None
    #: True when the output was composite (lcm_* fields), even with a single component.
    composite: bool = False

    @classmethod
    def plain(
        cls, stripe_size: int, osts: tuple[int, ...] | list[int], path: str | None = None
    ) -> Layout:
        """A plain RAID0 layout over `osts` (getstripe order) with one stripe size."""
        osts = tuple(osts)
        return cls(
            (
                Component(
                    0, EOF, stripe_size, len(osts), osts, stripe_offset=osts[0] if osts else -1
                ),
            ),
            path=path,
        )


# --------------------------------------------------------------------------------------------
# Where each byte lives
#
# Lustre's client (lustre/lov/lov_offset.c) works on the ABSOLUTE file offset `off`, also in
# a PFL component that starts later in the file: with stripe size S, stripe count C and
# stripe width W = S*C of the component that holds `off`,
#     stripe index  i   = (off // S) % C             row i of the obdidx table -> the OST
#     object offset     = (off // W) * S + off % S   byte position inside that stripe's object
# Nothing subtracts the component's start (e_start). So the first byte of a later component
# need not land on stripe 0, and that component's objects begin with a hole: in a component
# [4 MiB, 64 MiB) with S = 1 MiB and C = 4, file byte 4 MiB is byte 1 MiB of object 0, whose
# first 1 MiB is never written. object_extents() shows that hole for every object.
#
# Data-on-MDT: a component with pattern 'mdt' keeps its bytes in the file's inode on the MDT.
# There is one "stripe" and Lustre's stripe width for it is S, so the formula above gives
# object offset == file offset; the model reports the place as the string MDT instead of an
# OST index.
# --------------------------------------------------------------------------------------------

#: What locate() reports instead of an OST index for a Data-on-MDT component.
MDT = "MDT"


class Placement(NamedTuple):
    """Where one file byte is stored: OST index (or MDT), byte offset inside the object, and
    which component and stripe (row of the obdidx table) the object belongs to."""

    ost: int | str
    object_offset: int
    component_index: int
    stripe_index: int


class Piece(NamedTuple):
    """A run of consecutive file bytes that stays in one object, contiguous inside it."""

    file_offset: int
    length: int
    ost: int | str
    object_offset: int
    component_index: int
    stripe_index: int


def _is_dom(component: Component) -> bool:
    return component.pattern == "mdt"


def check_layout(layout: Layout) -> None:
    """Refuse layouts the arithmetic cannot serve, with the reason: gaps, bad sizes, no OSTs."""
    if not layout.components:
        raise LabError("the layout has no components; parse a complete `lfs getstripe` output")
    expected_start = 0
    for number, comp in enumerate(layout.components):
        if comp.start != expected_start:
            raise LabError(
                f"component {number} starts at byte {comp.start}, expected "
                f"{expected_start}: PFL components must cover the file without gaps"
            )
        # A placeholder (directory default, SEL extension) has no usable geometry yet;
        # locate() reports it as not instantiated when a byte falls in it.
        if comp.instantiated and comp.stripe_size <= 0:
            raise LabError(
                f"component {number} has stripe size {comp.stripe_size}; "
                "a stripe size must be a positive number of bytes"
            )
        if comp.instantiated and not _is_dom(comp) and comp.stripe_count < 1:
            raise LabError(
                f"component {number} has stripe count {comp.stripe_count}; "
                "an instantiated RAID0 component has at least one stripe"
            )
        if comp.end is EOF:
            if number != len(layout.components) - 1:
                raise LabError(f"component {number} runs to EOF but is not the last one")
        elif comp.end <= comp.start:
            raise LabError(
                f"component {number} ends at {comp.end}, not after its start {comp.start}"
            )
        else:
            expected_start = comp.end


def _component_at(layout: Layout, offset: int) -> int:
    """Index of the component whose extent holds `offset`, or a LabError saying why none."""
    if offset < 0:
        raise LabError(f"offset {offset} is negative; file offsets start at 0")
    for number, comp in enumerate(layout.components):
        if comp.end is EOF or offset < comp.end:
            return number
    raise LabError(
        f"offset {offset} is past the last component, which ends at "
        f"{layout.components[-1].end}: Lustre would first have to extend the layout"
    )


def _stripe_place(comp: Component, number: int, offset: int) -> Placement:
    """The placement of `offset` inside component `comp` (index `number`), by Lustre's rule."""
    if not comp.instantiated:
        raise LabError(
            f"component {number} (bytes from {comp.start}) is not instantiated: "
            "no OST has been chosen yet, so no byte has a place there"
        )
    size = comp.stripe_size
    if _is_dom(comp):
        return Placement(MDT, offset, number, 0)
    index = (offset // size) % comp.stripe_count
    if index >= len(comp.osts):
        raise LabError(
            f"byte {offset} is on stripe {index} of component {number}, but the "
            f"layout lists only {len(comp.osts)} of {comp.stripe_count} OSTs; use the "
            "complete `lfs getstripe` output"
        )
    width = size * comp.stripe_count
    return Placement(comp.osts[index], (offset // width) * size + offset % size, number, index)


def locate(layout: Layout, offset: int) -> Placement:
    """Which OST (or MDT) and object offset hold file byte `offset`, as the Lustre client
    computes it; raises a LabError where no place exists (past the layout's end, a component
    not instantiated yet, a truncated OST list)."""
    check_layout(layout)
    number = _component_at(layout, offset)
    return _stripe_place(layout.components[number], number, offset)


def pieces(layout: Layout, start: int, length: int) -> Iterator[Piece]:
    """The byte range [start, start+length) cut at stripe-unit and component boundaries."""
    check_layout(layout)
    if length < 0:
        raise LabError(f"a byte range cannot have negative length ({length})")
    offset, stop = start, start + length
    while offset < stop:
        number = _component_at(layout, offset)
        comp = layout.components[number]
        place = _stripe_place(comp, number, offset)
        unit_end = (offset // comp.stripe_size + 1) * comp.stripe_size
        if _is_dom(comp):
            unit_end = stop if comp.end is EOF else comp.end
        run_end = min(stop, unit_end, stop if comp.end is EOF else comp.end)
        yield Piece(offset, run_end - offset, *place)
        offset = run_end


def bytes_per_ost(layout: Layout, start: int, length: int) -> dict[int | str, int]:
    """How many bytes of [start, start+length) each OST (or the MDT) stores, in first-touch
    order; an overstriped layout adds up its several objects on one OST."""
    totals: dict[int | str, int] = {}
    for piece in pieces(layout, start, length):
        totals[piece.ost] = totals.get(piece.ost, 0) + piece.length
    return totals


def osts_touched(layout: Layout, start: int, length: int) -> list[int | str]:
    """The OSTs (or MDT) a read or write of [start, start+length) talks to, in first-touch order."""
    return list(bytes_per_ost(layout, start, length))


def object_extents(layout: Layout, size_bytes: int) -> pd.DataFrame:
    """One row per object that a file of `size_bytes` writes to: the object-offset range it
    covers and how many bytes are data versus the hole before its first byte (PFL)."""
    spans: dict[tuple[int, int], list] = {}
    for piece in pieces(layout, 0, size_bytes):
        key = (piece.component_index, piece.stripe_index)
        end = piece.object_offset + piece.length
        if key not in spans:
            spans[key] = [piece.ost, piece.object_offset, end, 0]
        span = spans[key]
        span[2] = max(span[2], end)
        span[3] += piece.length
    rows = [
        (comp, stripe, ost, first, end, data, first)
        for (comp, stripe), (ost, first, end, data) in sorted(spans.items())
    ]
    return pd.DataFrame(
        rows,
        columns=[
            "component_index",
            "stripe_index",
            "ost",
            "first_object_offset_bytes",
            "object_end_bytes",
            "data_bytes",
            "leading_hole_bytes",
        ],
    )


# --------------------------------------------------------------------------------------------
# Many writers, one file
# --------------------------------------------------------------------------------------------

#: Each writer writes its blocks back to back in one contiguous region of the file.
SEGMENTED = "segmented"
#: Writers take turns block by block: block j of writer w is block j*P + w of the file
#: (the access pattern of ALCF's warpdrive exercise and of most MPI-IO checkpoints).
INTERLEAVED = "interleaved"


def writer_blocks(
    writers: int,
    block_size: int,
    blocks_per_writer: int = 1,
    start: int = 0,
    pattern: str = SEGMENTED,
) -> Iterator[tuple[int, int, int]]:
    """(writer, file offset, length) of every block P writers write, in writer order.

    segmented:   writer w writes [start + w*n*B, start + (w+1)*n*B) as n consecutive blocks;
    interleaved: block j of writer w starts at start + (j*P + w)*B.
    With one block per writer the two patterns are the same.
    """
    if writers < 1 or block_size < 1 or blocks_per_writer < 1 or start < 0:
        raise LabError(
            "writers, block size and blocks per writer must be positive and the "
            f"start offset non-negative (got {writers}, {block_size}, "
            f"{blocks_per_writer}, {start})"
        )
    if pattern not in (SEGMENTED, INTERLEAVED):
        raise LabError(f"unknown access pattern {pattern!r}; use {SEGMENTED!r} or {INTERLEAVED!r}")
    for writer in range(writers):
        for block in range(blocks_per_writer):
            number = (
                writer * blocks_per_writer + block
                if pattern == SEGMENTED
                else block * writers + writer
            )
            yield writer, start + number * block_size, block_size


def writer_ost_grid(
    layout: Layout,
    writers: int,
    block_size: int,
    blocks_per_writer: int = 1,
    start: int = 0,
    pattern: str = SEGMENTED,
) -> pd.DataFrame:
    """Tidy frame, one row per (writer, OST) pair that exchanges data: how many bytes and in
    how many separate pieces (stripe-unit fragments) that writer sends to that OST."""
    totals: dict[tuple[int, int | str], list[int]] = {}
    for writer, offset, length in writer_blocks(
        writers, block_size, blocks_per_writer, start, pattern
    ):
        for piece in pieces(layout, offset, length):
            cell = totals.setdefault((writer, piece.ost), [0, 0])
            cell[0] += piece.length
            cell[1] += 1
    rows = [(writer, ost, data, count) for (writer, ost), (data, count) in totals.items()]
    frame = pd.DataFrame(rows, columns=["writer", "ost", "data_bytes", "pieces_count"])
    return frame.sort_values(
        ["writer", "data_bytes"], ascending=[True, False], kind="stable"
    ).reset_index(drop=True)


def grid_summary(grid: pd.DataFrame) -> dict[str, float | int]:
    """The numbers that say whether writers collide: OSTs per writer, writers per OST."""
    per_writer = grid.groupby("writer")["ost"].nunique()
    per_ost = grid.groupby("ost")["writer"].nunique()
    return {
        "writers_count": int(per_writer.size),
        "osts_used_count": int(per_ost.size),
        "osts_per_writer_max": int(per_writer.max()),
        "osts_per_writer_mean": round(float(per_writer.mean()), 3),
        "writers_per_ost_max": int(per_ost.max()),
        "writers_per_ost_mean": round(float(per_ost.mean()), 3),
        "writers_on_one_ost_count": int((per_writer == 1).sum()),
    }


def is_aligned(offset: int, length: int, stripe_size: int) -> bool:
    """True when [offset, offset+length) stays inside one stripe unit of size `stripe_size`,
    so a plain layout sends it to exactly one OST."""
    return length > 0 and offset // stripe_size == (offset + length - 1) // stripe_size
