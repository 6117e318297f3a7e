"""Read what `lfs getstripe` and `lfs df` print, as data, without needing Lustre.

`lfs getstripe` prints one of a few shapes, all of them `key: value` lines:

* a plain (v1) file: `lmm_stripe_count`, `lmm_stripe_size`, `lmm_pattern` (a name, or the
  number 1 from older clients), `lmm_stripe_offset`, then an obdidx table (tab- or
  space-separated) whose first column lists the OSTs in stripe order;
* a composite (PFL, Data-on-MDT, self-extending) file: `lcm_layout_gen`, `lcm_entry_count`,
  then per component `lcme_id`, `lcme_flags`, `lcme_extent.e_start`/`e_end` (`EOF`) and
  indented `lmm_*` fields, with `- N: { l_ost_idx: X, ... }` objects once instantiated;
* `-y` (YAML): the same keys, components under `componentN:` / `sub_layout:`, objects as a
  YAML list of `- l_ost_idx: X` entries. Because the keys are the same, one line reader
  handles plain and YAML output, and no YAML library is needed;
* a directory default: the one-line form `stripe_count: 1 stripe_size: 1048576 pattern: 0
  stripe_offset: -1` (also inside composite defaults), or `lmm_*` lines without objects.

Unknown fields are kept out of the way (new clients add some), whitespace is free, and a
missing essential field raises a LabError naming it, so a truncated copy never parses as
a smaller layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from iolab.core.errors import LabError
from iolab.hpc.stripes import EOF, Component, Layout

#: Older clients print the pattern as a number: LOV_PATTERN_RAID0 is 1; 0 (unset, in a
#: directory default) and an empty value mean the file system default, which is RAID0.
NUMERIC_PATTERNS = {"0": "raid0", "1": "raid0", "": "raid0"}
KEY = re.compile(r"^[A-Za-z_][\w.]*:$")
OST_INDEX = re.compile(r"l_ost_idx:\s*(\d+)")
TABLE_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+0x[0-9a-fA-F]+\s+\S+\s*$")
TARGET = re.compile(r"^(?P<fs>.+)-(?P<kind>MDT|OST)(?P<hex>[0-9a-fA-F]{4})_UUID$")
MOUNT = re.compile(r"^(?P<mount>.*?)(\[(?P<kind>MDT|OST):(?P<index>\d+)\])?$")


@dataclass
class _Record:
    """The fields of one path's output while it is being read."""

    path: str | None = None
    header: dict[str, str] = field(default_factory=dict)
    plain: dict[str, str] = field(default_factory=dict)
    osts: list[int] = field(default_factory=list)
    components: list[dict] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.header or self.plain or self.osts or self.components)


def _key_values(line: str) -> list[tuple[str, str]]:
    """The `key: value` pairs of a line (one, or four in the one-line directory default)."""
    pairs: list[tuple[str, list[str]]] = []
    for token in line.split():
        if KEY.match(token):
            pairs.append((token[:-1], []))
        elif pairs:
            pairs[-1][1].append(token)
        else:
            return []
    return [(k, " ".join(v)) for k, v in pairs]


def _records(text: str) -> list[_Record]:
    """Split getstripe output into one record per path, collecting fields and OST lists."""
    records = [_Record()]
    in_table = False
    for line in text.splitlines():
        if not line.strip():
            continue
        record = records[-1]
        target = record.components[-1] if record.components else None
        if "obdidx" in line.split():
            in_table = True
            continue
        row = TABLE_ROW.match(line)
        if in_table and row:
            record.osts.append(int(row.group(1)))
            continue
        in_table = False
        index = OST_INDEX.search(line)
        if index:
            (target["osts"] if target is not None else record.osts).append(int(index.group(1)))
            continue
        pairs = _key_values(line)
        if not pairs:
            if not record.empty():
                records.append(_Record())
            records[-1].path = line.strip()
            continue
        for key, value in pairs:
            if key == "lcme_id" or re.fullmatch(r"component\d+", key):
                if key == "lcme_id" and target is not None and "lcme_id" not in target:
                    target["lcme_id"] = value  # YAML: componentN: then lcme_id
                    continue
                target = {"osts": []}
                record.components.append(target)
                if key == "lcme_id":
                    target["lcme_id"] = value
            elif key.startswith("lcm_"):
                record.header[key] = value
            elif target is not None:
                target[key] = value
            else:
                record.plain[key] = value
    return [r for r in records if not r.empty()]


def _field(fields: dict, names: tuple[str, ...], what: str) -> str:
    """The first of `names` present in `fields`, or a LabError naming the missing field."""
    for name in names:
        if name in fields:
            return fields[name]
    raise LabError(
        f"the {what} has no {names[0]} field: pass the complete, unedited output of `lfs getstripe`"
    )


def _int(value: str, name: str) -> int:
    try:
        return int(value, 0) if value.lower().startswith("0x") else int(value)
    except ValueError:
        raise LabError(
            f"{name} is {value!r}, not a whole number: is this `lfs getstripe` output?"
        ) from None


def _pattern(value: str) -> str:
    return NUMERIC_PATTERNS.get(value, value)


def _component(
    fields: dict,
    osts: list[int],
    *,
    start: int,
    end: int | None,
    instantiated: bool,
    component_id: int | None,
    what: str,
    allow_partial: bool,
) -> Component:
    """One Component from its lmm_* (or one-line) fields, checking the OST list is complete."""
    count = _int(_field(fields, ("lmm_stripe_count", "stripe_count"), what), "stripe_count")
    extension = fields.get("lmm_extension_size")
    if extension is not None and not any(k in fields for k in ("lmm_stripe_size", "stripe_size")):
        size = 0  # a self-extending placeholder has no stripes of its own
    else:
        size = _int(_field(fields, ("lmm_stripe_size", "stripe_size"), what), "stripe_size")
    pattern = _pattern(fields.get("lmm_pattern", fields.get("pattern", "raid0")))
    if osts and len(osts) != count and not allow_partial:
        raise LabError(
            f"the {what} lists {len(osts)} OSTs but its stripe count is {count}: "
            "the output looks truncated; pass the complete output (or "
            "allow_partial=True / --allow-partial to keep the OSTs listed)"
        )
    return Component(
        start=start,
        end=end,
        stripe_size=size,
        stripe_count=count,
        osts=tuple(osts),
        pattern=pattern,
        stripe_offset=_int(
            fields.get("lmm_stripe_offset", fields.get("stripe_offset", "-1")), "stripe_offset"
        ),
        pool=fields.get("lmm_pool", fields.get("pool")) or None,
        instantiated=instantiated,
        component_id=component_id,
        extension_size=None if extension is None else _int(extension, "lmm_extension_size"),
    )


def _layout(record: _Record, allow_partial: bool) -> Layout:
    """A Layout from one record: composite when it has lcm_*/component fields."""
    if not (record.header or record.components):
        what = f"layout of {record.path}" if record.path else "layout"
        component = _component(
            record.plain,
            record.osts,
            start=0,
            end=EOF,
            instantiated=bool(record.osts),
            component_id=None,
            what=what,
            allow_partial=allow_partial,
        )
        return Layout((component,), path=record.path)
    expected = record.header.get("lcm_entry_count")
    if expected is not None and _int(expected, "lcm_entry_count") != len(record.components):
        raise LabError(
            f"lcm_entry_count is {expected} but {len(record.components)} components "
            "were found: the output looks truncated; pass all of it"
        )
    components = []
    for number, fields in enumerate(record.components, start=1):
        what = f"component {number}"
        end = _field(fields, ("lcme_extent.e_end",), what)
        flags = fields.get("lcme_flags", "0").split(",")
        cid = fields.get("lcme_id", "N/A")
        components.append(
            _component(
                fields,
                fields["osts"],
                start=_int(_field(fields, ("lcme_extent.e_start",), what), "lcme_extent.e_start"),
                end=EOF if end == "EOF" else _int(end, "lcme_extent.e_end"),
                instantiated="init" in flags,
                component_id=None if cid == "N/A" else _int(cid, "lcme_id"),
                what=what,
                allow_partial=allow_partial,
            )
        )
    return Layout(tuple(components), path=record.path, composite=True)


def _checked_records(text: str) -> list[_Record]:
    records = _records(text)
    if not any(r.header or r.components or r.plain for r in records):
        raise LabError(
            "no `lfs getstripe` fields (lmm_stripe_count, stripe_count or "
            "lcm_entry_count) found in the text: pass the output of "
            "`lfs getstripe FILE`"
        )
    return records


def parse_getstripe_many(text: str, allow_partial: bool = False) -> dict[str, Layout]:
    """Every layout in an output that lists several paths (e.g. `lfs getstripe DIR`).

    Each block starts with its path line; a directory's block holds its default layout
    (instantiated False, no OSTs). Paths must be unique; an output without path lines gives
    one entry under the key "".
    """
    layouts: dict[str, Layout] = {}
    for record in _checked_records(text):
        key = record.path or ""
        if key in layouts:
            raise LabError(
                f"the path {key!r} appears twice in the output: pass one "
                "`lfs getstripe` listing at a time"
            )
        layouts[key] = _layout(record, allow_partial)
    return layouts


def parse_getstripe(text: str, allow_partial: bool = False) -> Layout:
    """The layout in one path's `lfs getstripe` output (plain, composite/PFL, DoM or `-y`).

    `allow_partial` keeps an obdidx table shorter than the stripe count (a documentation
    excerpt with rows left out); by default that is refused as a truncated copy.
    """
    records = _checked_records(text)
    if len(records) > 1:
        raise LabError(
            f"the output holds {len(records)} paths' layouts: use "
            "parse_getstripe_many, or run `lfs getstripe` on one file"
        )
    return _layout(records[0], allow_partial)


def parse_getstripe_yaml(text: str) -> Layout:
    """The layout in `lfs getstripe -y` output, plain or composite.

    The YAML form repeats the plain form's keys (lmm_*, lcm_*, lcme_*), with objects as
    `- l_ost_idx: N` items, so the same reader applies; "lcme_flags: 0" stays "not
    instantiated" rather than becoming the integer 0 a YAML loader would give.
    """
    return parse_getstripe(text)


def parse_dir_default(text: str) -> Component:
    """A directory's default layout (`lfs getstripe -d DIR`), one-line or lmm_* form.

    Returns one Component covering the whole file (start 0, end EOF) with no OSTs and
    instantiated False: a default only says how new files will be striped. A composite
    default has several components: read it with parse_getstripe instead.
    """
    records = _checked_records(text)
    if len(records) > 1 or records[0].header or records[0].components:
        raise LabError(
            "this is not a single plain directory default (it has several paths "
            "or components): read it with parse_getstripe or parse_getstripe_many"
        )
    record = records[0]
    if record.osts:
        raise LabError(
            "this output lists OST objects, so it is a file's layout, not a "
            "directory default: read it with parse_getstripe"
        )
    return _component(
        record.plain,
        [],
        start=0,
        end=EOF,
        instantiated=False,
        component_id=None,
        what="directory default",
        allow_partial=False,
    )


def _amount(value: str, scale: int, human_base: int | None) -> int:
    """A count from an lfs df column: plain numbers times `scale`, or -h suffixed values."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTPE]?)", value)
    if not match:
        raise LabError(
            f"{value!r} is not an `lfs df` number: pass the output of "
            "`lfs df`, `lfs df -h` or `lfs df -i`"
        )
    number, suffix = match.groups()
    if suffix or "." in number:
        if human_base is None:
            raise LabError(
                "`lfs df -ih` rounds inode counts to K/M: run `lfs df -i` "
                "without -h to get exact counts"
            )
        return round(float(number) * human_base ** " KMGTPE".index(suffix or " "))
    return int(number) * scale


def parse_lfs_df(text: str) -> pd.DataFrame:
    """One row per MDT/OST (and one per file system summary) of `lfs df`, `-h` or `-i`.

    Space columns are bytes (`lfs df` prints KiB; `-h` values are rounded by lfs to three
    digits, so their bytes are approximate); `-i` gives inode columns instead. Summary rows
    (`filesystem_summary:`, or `filesystem summary:` from older clients) have kind
    "summary" and no index: select `kind != "summary"` for the targets. Several file
    systems in one output are kept apart by `fs_name`.
    """
    rows: list[dict] = []
    inodes: bool | None = None
    pending = ""
    for raw in text.splitlines():
        line = (pending + " " + raw).strip() if pending else raw.strip()
        pending = ""
        if not line:
            continue
        tokens = line.split()
        if tokens[0] == "UUID":
            inodes = "Inodes" in tokens
            continue
        if "inactive" in tokens or "unavailable" in line:
            continue  # a target lfs could not reach has no numbers to report
        if len(tokens) == 1 and TARGET.match(tokens[0]):
            pending = tokens[0]  # lfs wraps a long UUID onto its own line
            continue
        summary = tokens[0] == "filesystem_summary:" or tokens[:2] == ["filesystem", "summary:"]
        values = tokens[2:] if tokens[0] == "filesystem" else tokens[1:]
        if inodes is None or len(values) != 5 or not values[3].endswith("%"):
            raise LabError(
                f"cannot read the `lfs df` line {raw.strip()!r}: pass the whole "
                "output, starting with its UUID header line"
            )
        mount = MOUNT.match(values[4])
        assert mount is not None  # MOUNT matches any text without a newline, as a token is
        if summary:
            kind, index, target = "summary", pd.NA, "filesystem_summary"
            fs_name = (
                rows[-1]["fs_name"]
                if rows and rows[-1]["mount"] == mount["mount"]
                else mount["mount"]
            )
        else:
            name = TARGET.match(tokens[0])
            if not name:
                raise LabError(
                    f"{tokens[0]!r} is not an MDT or OST UUID (like "
                    "fsname-OST0000_UUID): pass the output of `lfs df`"
                )
            kind, target, fs_name = name["kind"], tokens[0], name["fs"]
            index = int(mount["index"]) if mount["index"] else int(name["hex"], 16)
        names = (
            ("total_inodes", "used_inodes", "free_inodes")
            if inodes
            else ("total_bytes", "used_bytes", "available_bytes")
        )
        scale, base = (1, None) if inodes else (1024, 1024)
        amounts = {n: _amount(v, scale, base) for n, v in zip(names, values[:3], strict=True)}
        rows.append(
            {
                "fs_name": fs_name,
                "target": target,
                "kind": kind,
                "index": index,
                **amounts,
                "used_pct": int(values[3].rstrip("%")),
                "mount": mount["mount"],
            }
        )
    if not rows:
        raise LabError("no MDT or OST rows found: pass the output of `lfs df` (or -h, -i)")
    frame = pd.DataFrame(rows)
    frame["index"] = frame["index"].astype("Int64")
    return frame
