"""The class wall: each learner's results as one small file, and the page that shows them all.

A learner's file is `wall/<user>.json` in the class folder, written by the learner's own lab
(`iolab lab` at its end, `iolab answer` after each answer) and readable by the class. The
folder is sticky, so no learner can replace or delete another's file, and the wall trusts
nothing it reads: a file counts only if it is a regular file (never read through a link or
waited on as a FIFO) named after its owner, small, and every field passes WALL_SCHEMA; each
learner counts once (their newest file); everything else is left out and counted on the page.
A classmate who took a learner's name first only sends that learner's file to a name of
their own (USER~HEX.json): it never stops their `iolab answer` or `iolab lab`.

The page is for the projector: per exercise the spread of the class's numbers (a strip plot,
one dot per learner, coloured by node: wall_plots.py), who has finished which checked
exercise, and the outliers (a number three times the class median, or a third of it: a slow
disk, a node with a busy neighbour). Images are inlined, so the page loads nothing from
anywhere.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import grp
import html
import io
import json
import math
import os
import pwd
import re
import secrets
import socket
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.class_folder import ClassFolder
from iolab.core.errors import LabError
from iolab.core.lab_dirs import results_dir
from iolab.core.safe_input import Check, NotRegularFile, field_check, open_regular, record_problem
from iolab.core.wording import counted
from iolab.core.workspace import workdir
from iolab.measure.context import mount_for

#: A learner's file holds a few readers and checks; anything larger is not one of the lab's.
WALL_FILE_MAX_BYTES = 64 * 1024
WALL_FILE_MODE = 0o640
#: How far from the class median a number must be to be called out on the wall.
OUTLIER_FACTOR = 3.0
#: The readers' columns the wall shows, with their labels (units in the labels).
READER_FIGURES = {
    "wall_median_s": "warm (s)",
    "cold_wall_median_s": "cold (s)",
    "dataset_file_opens": "dataset-file opens",
    "total_calls": "system calls",
}
#: The figures the wall plots as times.
TIME_FIGURES = ["warm (s)", "cold (s)"]
#: What notebook 05 glues from the learner's own fio run on the local disk, with its label.
FIO_FIGURES = {
    "local_qd1_iops": "4 KiB random reads, depth 1 (IOPS)",
    "local_qd16_iops": "4 KiB random reads, depth 16 (IOPS)",
    "local_seq_read_direct_mibps": "1 MiB sequential reads (MiB/s)",
}
FIO_NOTEBOOK = "05-fio"
#: Readers and checks a file may list: the lab has five readers and ten checked exercises.
MAX_READERS = 64
MAX_CHECKS = 256
#: A host name, a file system type, a reader: what the lab writes there, and nothing that
#: could reach a terminal, a plot's label or the page as anything but itself.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,252}")
#: A check's key: lesson and exercise ("02-tar-size", "02-naive-opens-measured").
_CHECK_KEY = re.compile(r"\d{2}-[a-z0-9-]{1,64}")


def own_results() -> dict:
    """What this learner's lab has measured so far: readers (from `make lab`), node, place."""
    readers = {}
    path = results_dir() / "readers.csv"
    if path.is_file():
        table = pd.read_csv(path)
        for row in table.to_dict("records"):
            readers[row["reader"]] = {
                key: (None if pd.isna(row.get(key)) else float(row[key]))
                for key in READER_FIGURES
                if key in row
            }
    return {
        "node": socket.gethostname(),
        "workspace_fs": mount_for(workdir()).fs_type,
        "readers": readers,
        "fio": own_fio_figures(),
    }


def own_fio_figures() -> dict[str, float]:
    """Notebook 05's glued figures of this learner's local fio run, once `make lab` has
    executed it; nothing when it showed the recorded run instead (fio missing here)."""
    results = results_dir()
    executed = results / "notebooks" / f"{FIO_NOTEBOOK}.ipynb"
    fallbacks = results / "not-run-here.txt"
    if not executed.is_file() or (
        fallbacks.is_file()
        and any(
            line.startswith(f"{FIO_NOTEBOOK}: local:")
            for line in fallbacks.read_text().splitlines()
        )
    ):
        return {}
    figures = {}
    with contextlib.suppress(OSError, ValueError):
        for cell in json.loads(executed.read_text()).get("cells", []):
            for output in cell.get("outputs", []):
                name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                if name in FIO_FIGURES:
                    figures[name] = float(output["data"]["application/papermill.record/text/plain"])
    return figures


def learner_name(uid: int) -> str:
    """The name a learner's wall file carries: the login name of its owner `uid` (never
    $USER, which anyone can set), uid<N> for an account without a passwd entry."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


def not_on_the_wall(joined: ClassFolder, records: list[dict]) -> list[str]:
    """The class group's members (the learners the setup let in, less its instructor) with
    no results on the wall yet: who has not joined, or has not run `make lab`. The group's
    member list names those who have it as an extra group; one whose primary group it is
    cannot be listed this way."""
    try:
        group = grp.getgrgid(os.stat(joined.root).st_gid)
    except (KeyError, OSError):
        return []
    present = {str(record.get("user")) for record in records}
    return sorted(set(group.gr_mem) - present - {joined.made_by})


def _named_after(name: str, user: str) -> bool:
    """Whether a file called `name` may be `user`'s: USER.json, or USER~HEX.json, the name
    publish falls back to when a classmate took USER.json first."""
    return (
        name == f"{user}.json"
        or re.fullmatch(rf"{re.escape(user)}~[0-9a-f]{{16}}\.json", name) is not None
    )


def _figures(allowed: Iterable[str], none_too: bool) -> Check:
    """A Check for a mapping of figures: keys among `allowed`, finite numbers (or None)."""
    keys = set(allowed)

    def check(value: object, name: str) -> str | None:
        if not isinstance(value, dict):
            return f"{name} is not a JSON object"
        for key, figure in value.items():
            if key not in keys:
                return f"{name} has an unknown figure"
            if not (
                figure is None
                and none_too
                or type(figure) in (int, float)
                and math.isfinite(figure)
            ):
                return f"{name}.{key} is not a finite number"
        return None

    return check


def _mapping(most: int, key_pattern: re.Pattern, each: Check) -> Check:
    """A Check for a JSON object of at most `most` entries, keys like `key_pattern`."""

    def check(value: object, name: str) -> str | None:
        if not isinstance(value, dict):
            return f"{name} is not a JSON object"
        if len(value) > most:
            return f"{name} has more than {most} entries"
        for key, item in value.items():
            if not key_pattern.fullmatch(key):
                return f"{name} has a key that is not a plain name"
            problem = each(item, f"{name}.{key}")
            if problem:
                return problem
        return None

    return check


_TRUTH = field_check(lambda value: isinstance(value, bool), "true or false")


def _check_state(value: object, name: str) -> str | None:
    """A checked exercise's state: only whether it was right is read."""
    return record_problem(value, {"right": _TRUTH}, name)


_PLAIN = field_check(
    lambda value: isinstance(value, str) and _NAME.fullmatch(value) is not None, "a plain name"
)
#: What a wall file must hold, every field checked before any is used: names are plain
#: (they reach labels, the page and terminals), numbers finite, and nothing nests deeper than
#: the lab writes it.
WALL_SCHEMA: dict[str, Check] = {
    "node": _PLAIN,
    "workspace_fs": _PLAIN,
    "readers": _mapping(MAX_READERS, _NAME, _figures(READER_FIGURES, none_too=True)),
    "fio": _figures(FIO_FIGURES, none_too=False),
    "checks": _mapping(MAX_CHECKS, _CHECK_KEY, _check_state),
}


@dataclass(frozen=True)
class Wall:
    """What the wall folder holds: one record per learner, and the files left out, by why."""

    records: list[dict]
    ignored: dict[str, int]

    def ignored_text(self) -> str:
        """'2 files ignored (1 a link, 1 not named after its owner)', or '' if none was."""
        count = sum(self.ignored.values())
        if not count:
            return ""
        reasons = ", ".join(f"{number} {why}" for why, number in sorted(self.ignored.items()))
        return f"{counted(count, 'file')} ignored ({reasons})"


@dataclass(frozen=True)
class _Found:
    """A learner's file that passed every check, and its record as the wall uses it."""

    name: str
    uid: int
    mtime_ns: int
    record: dict


def _load(wall_fd: int, name: str) -> _Found | str:
    """The learner file `name` in the held wall folder, checked; else why it is left out.
    Its owner is the open file's (fstat), so a name swapped after listing cannot pass."""
    try:
        with open_regular(name, follow_links=False, dir_fd=wall_fd) as handle:
            info = os.fstat(handle.fileno())
            data = handle.read(WALL_FILE_MAX_BYTES + 1)
    except OSError as err:  # a folder fails in open(), before open_regular's own check
        if isinstance(err, NotRegularFile) or err.errno == errno.EISDIR:
            return "not a regular file"
        return "a link" if err.errno == errno.ELOOP else "unreadable"
    if not _named_after(name, learner_name(info.st_uid)):
        return "not named after its owner"
    if len(data) > WALL_FILE_MAX_BYTES:
        return f"larger than {WALL_FILE_MAX_BYTES // 1024} KiB"
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return "not valid JSON"
    if record_problem(record, WALL_SCHEMA):
        return "not a wall record"
    kept = {key: record[key] for key in WALL_SCHEMA}
    kept["checks"] = {key: {"right": state["right"]} for key, state in kept["checks"].items()}
    return _Found(name, info.st_uid, info.st_mtime_ns, {"user": learner_name(info.st_uid), **kept})


def _scan(wall_fd: int) -> tuple[dict[int, list[_Found]], Counter]:
    """Every learner's checked files in the held wall folder (newest first), and the count of
    the others by why. Hidden names (a publish's partial file) are not looked at."""
    by_owner: dict[int, list[_Found]] = {}
    ignored: Counter = Counter()
    for name in sorted(os.listdir(wall_fd)):
        if name.startswith("."):
            continue
        found = _load(wall_fd, name)
        if isinstance(found, str):
            ignored[found] += 1
        else:
            by_owner.setdefault(found.uid, []).append(found)
    for files in by_owner.values():
        files.sort(key=lambda found: found.mtime_ns, reverse=True)
    return by_owner, ignored


@contextlib.contextmanager
def _held_wall(joined: ClassFolder) -> Iterator[int]:
    """The class's wall folder, open: every name below is looked up in it, not by a path."""
    fd = os.open(joined.wall, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def scan_wall(joined: ClassFolder) -> Wall:
    """One record per learner, named by its file's owner, from the newest of their files
    (a second file or a hard link counts once); every other file is left out and counted.
    A class without a wall folder has an empty wall."""
    try:
        with _held_wall(joined) as fd:
            by_owner, ignored = _scan(fd)
    except OSError:
        return Wall([], {})
    records = []
    for files in by_owner.values():
        records.append(files[0].record)
        ignored["an older copy of a learner's file"] += len(files) - 1
    records.sort(key=lambda record: record["user"])
    return Wall(records, {why: number for why, number in ignored.items() if number})


def read_wall(joined: ClassFolder) -> list[dict]:
    """Every learner's record (scan_wall's, without the count of files left out)."""
    return scan_wall(joined).records


def best_checks(earlier: dict, new: dict) -> dict:
    """Each exercise's best outcome: a right answer stays right on the wall whatever the
    learner tries after it (trying another figure must not look like forgetting)."""
    kept = {**earlier}
    for key, state in new.items():
        if state.get("right") or not earlier.get(key, {}).get("right"):
            kept[key] = state
    return kept


def publish(joined: ClassFolder, checks: dict | None = None) -> Path:
    """Write (or update) this learner's file on the wall; returns its path.

    The checks of earlier runs (from the newest file of ours that passes the schema) are kept
    and `checks` added to them, each exercise at its best (best_checks). Written beside its
    final name and renamed over it, so the wall never reads half a file; every name is looked
    up in the held wall folder. When a classmate took USER.json first (the sticky folder lets
    nobody but them replace it), the record goes to USER~HEX.json, which the wall counts as
    ours: their file cannot keep us off it.
    """
    me = learner_name(os.getuid())
    partial = f".{me}.{secrets.token_hex(8)}.partial"
    target = f"{me}.json"
    try:
        with _held_wall(joined) as fd:
            mine = _scan(fd)[0].get(os.getuid(), [])
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(target, dir_fd=fd).st_uid != os.getuid():
                    fallbacks = [found.name for found in mine if found.name != target]
                    target = fallbacks[0] if fallbacks else f"{me}~{secrets.token_hex(8)}.json"
            earlier = mine[0].record["checks"] if mine else {}
            record = {
                **own_results(),
                "user": me,
                "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
                "checks": best_checks(earlier, checks or {}),
            }
            try:
                _write_new(fd, partial, json.dumps(record))
                os.replace(partial, target, src_dir_fd=fd, dst_dir_fd=fd)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(partial, dir_fd=fd)
    except OSError as err:
        raise LabError(
            f"cannot write your results to the class wall {joined.wall} "
            f"({err.strerror}); tell your instructor"
        ) from None
    return joined.wall / target


def _write_new(folder_fd: int, name: str, text: str) -> None:
    """A new file `name` in the held folder, holding `text`, readable by the class whatever
    the umask (the lab's keeps files private)."""
    fd = os.open(
        name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, WALL_FILE_MODE, dir_fd=folder_fd
    )
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), WALL_FILE_MODE)
        handle.write(text)


def figures_frame(records: list[dict]) -> pd.DataFrame:
    """One row per learner, reader and figure: user, node, workspace_fs, reader, figure, value."""
    rows = [
        {
            "user": record["user"],
            "node": str(record.get("node", "?")),
            "workspace_fs": str(record.get("workspace_fs", "?")),
            "reader": reader,
            "figure": READER_FIGURES[key],
            "value": value,
        }
        for record in records
        for reader, figures in (record.get("readers") or {}).items()
        if isinstance(figures, dict)
        for key, value in figures.items()
        if key in READER_FIGURES and isinstance(value, (int, float)) and math.isfinite(value)
    ]
    rows += [
        {
            "user": record["user"],
            "node": str(record.get("node", "?")),
            "workspace_fs": str(record.get("workspace_fs", "?")),
            "reader": "fio",
            "figure": FIO_FIGURES[key],
            "value": value,
        }
        for record in records
        for key, value in (record.get("fio") or {}).items()
        if key in FIO_FIGURES and isinstance(value, (int, float)) and math.isfinite(value)
    ]
    return pd.DataFrame(rows, columns=["user", "node", "workspace_fs", "reader", "figure", "value"])


def outliers(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers at least OUTLIER_FACTOR times the class median of their reader and figure, or
    at most its inverse (three learners at least, or a median means little)."""
    if frame.empty:
        return frame.assign(median=[], times_median=[])
    grouped = frame.groupby(["reader", "figure"])["value"]
    with_median = frame.assign(
        median=grouped.transform("median"), learners=grouped.transform("size")
    )
    with_median = with_median[(with_median["learners"] >= 3) & (with_median["median"] > 0)]
    ratio = with_median["value"] / with_median["median"]
    flagged = with_median[(ratio >= OUTLIER_FACTOR) | (ratio <= 1 / OUTLIER_FACTOR)]
    return flagged.assign(times_median=(flagged["value"] / flagged["median"]).round(2)).drop(
        columns="learners"
    )


def progress_frame(records: list[dict], exercises: list[str]) -> pd.DataFrame:
    """Learner by checked exercise: "right", "tried" or empty."""
    rows = []
    for record in records:
        checks = record.get("checks") or {}
        row = {"user": record["user"]}
        for key in exercises:
            state = checks.get(key)
            row[key] = (
                "" if not isinstance(state, dict) else ("right" if state.get("right") else "tried")
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=["user", *exercises])


def where_i_sit(frame: pd.DataFrame, user: str) -> list[str]:
    """For one learner: their rank among the class per reader and time (1 = fastest)."""
    lines = []
    times = frame[frame["figure"].str.endswith("(s)")]
    for (reader, figure), group in times.groupby(["reader", "figure"]):
        mine = group[group["user"] == user]
        if mine.empty:
            continue
        value = float(mine["value"].iloc[0])
        rank = int((group["value"] < value).sum()) + 1
        lines.append(
            f"{reader} {figure}: {value:.3f}, {rank} of {len(group)} "
            f"(class median {group['value'].median():.3f})"
        )
    return lines


def _png(frame: pd.DataFrame, labels: list[str], named: bool = False) -> str:
    """strip_plot of `labels` as base64 PNG for the page (empty without data)."""
    import matplotlib.pyplot as plt

    from iolab.classmode.wall_plots import strip_plot

    figure = strip_plot(frame, labels, named)
    if figure is None:
        return ""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def three_digits(value: float) -> str:
    """A measured figure to three significant digits, never in e-notation: 7,694 or 0.0123
    (a wall shows what a run measured, not the float it was stored as)."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{round(value, decimals):,.{decimals}f}"


def wall_page(
    joined: ClassFolder,
    records: list[dict],
    exercises: list[str],
    ignored: str = "",
    queue: str = "",
    refresh_s: int | None = None,
    absent: list[str] | None = None,
    named: bool = False,
) -> str:
    """The projector page: spread, progress, outliers and the heavy-step `queue` (its
    summary line), self-contained HTML that reads on a phone too; `ignored` says which files
    were left out (Wall.ignored_text). With `refresh_s` (`class wall --watch`, which rebuilds
    it that often) the page reloads itself as often; without, it says how to update it.
    `absent` names the learners with nothing on the wall yet (not_on_the_wall); `named`
    puts each learner's name beside their dots."""
    frame = figures_frame(records)
    image = _png(frame, TIME_FIGURES, named)
    fio_image = _png(frame, list(FIO_FIGURES.values()), named)
    flagged = outliers(frame)
    fio_picture = (
        f'<img alt="the class\'s fio figures" src="data:image/png;base64,{fio_image}">'
        if fio_image
        else "<p>No fio figures yet: they arrive when a learner's "
        "<code>make lab</code> has run notebook 05 with fio.</p>"
    )
    progress = progress_frame(records, exercises)
    picture = (
        f'<img alt="the class\'s reader times" src="data:image/png;base64,{image}">'
        if image
        else "<p>No reader results yet: they arrive when a learner's "
        "<code>make lab</code> has timed the readers.</p>"
    )
    flagged_html = (
        flagged[
            ["user", "node", "workspace_fs", "reader", "figure", "value", "median", "times_median"]
        ].to_html(
            index=False,
            formatters={
                "value": three_digits,
                "median": three_digits,
                "times_median": lambda times: f"{times:.1f}",
            },
        )
        if not flagged.empty
        else "<p>None: every number is within a factor of "
        f"{OUTLIER_FACTOR:g} of the class median.</p>"
    )
    done = int((progress[exercises] == "right").to_numpy().sum()) if exercises else 0
    reload = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    updated = (
        f"the page reloads itself every {refresh_s} s while <code>iolab class wall --watch "
        f"{refresh_s}</code> rebuilds it"
        if refresh_s
        else "rerun <code>iolab class wall</code> to update it (or keep it fresh with "
        "<code>--watch 60</code>)"
    )
    queue_html = f"<h2>Heavy steps now</h2><p>{html.escape(queue)}</p>" if queue else ""
    if absent:
        queue_html += (
            f"<h2>Nothing on the wall yet ({len(absent)})</h2>"
            f"<p>{html.escape(', '.join(absent))}</p>"
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">{reload}
<title>Class wall: {html.escape(joined.name)}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px}} img{{max-width:100%}}
.scroll{{overflow-x:auto}} @media (max-width:600px){{body{{margin:0.5em}}
td,th{{padding:1px 3px;font-size:0.85em}}}}</style></head>
<body><h1>Class wall: {html.escape(joined.name)}</h1>
<p>{len(records)} of {joined.learners} learners have results; {done} checked answers right.
{html.escape(ignored.capitalize() + ".") if ignored else ""}
Built {time.strftime("%H:%M:%S")}; {updated}.</p>{queue_html}
<h2>Reader times across the class</h2>{picture}
<h2>fio on each learner's disk</h2>{fio_picture}
<h2>Outliers</h2><div class="scroll">{flagged_html}</div>
<h2>Checked exercises (<code>iolab answer NN</code>)</h2>
<div class="scroll">{progress.to_html(index=False)}</div>
</body></html>
"""
