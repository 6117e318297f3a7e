"""Lustre file layouts as data, and the exact arithmetic of where each byte lives.

A Lustre file is cut into stripe-size pieces dealt round-robin over the OST objects listed by
`lfs getstripe` (the obdidx column, in that order: only the first equals lmm_stripe_offset,
the MDS picks the rest). A composite (PFL) layout is a list of such RAID0 layouts, each for
an absolute byte range of the file. The parsers in iolab.lustre produce these types; the
model below answers which OST and object offset hold a byte, which OSTs a range touches, and
how P writers share the OSTs.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Layout:
    """A file's layout: one component for a plain file, several (by offset) for PFL."""

    components: tuple[Component, ...]
    path: str | None = None
    #: True when the output was composite (lcm_* fields), even with a single component.
    composite: bool = False

    @classmethod
    def plain(cls, stripe_size: int, osts: tuple[int, ...] | list[int],
              path: str | None = None) -> "Layout":
        """A plain RAID0 layout over `osts` (getstripe order) with one stripe size."""
        osts = tuple(osts)
        return cls((Component(0, EOF, stripe_size, len(osts), osts,
                              stripe_offset=osts[0] if osts else -1),), path=path)
