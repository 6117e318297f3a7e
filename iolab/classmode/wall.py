"""The class wall: each learner's results as one small file, and the page that shows them all.

A learner's file is `wall/<user>.json` in the class folder, written by the learner's own lab
(`iolab lab` at its end, `iolab check` after each answer) and readable by the class. The
folder is sticky, so no learner can replace or delete another's file; the wall trusts a
file's owner, not its name, so a file named after someone else counts for its owner only.
The page is for the projector: per exercise the spread of the class's numbers (a strip
plot, one dot per learner, coloured by node: wall_plots.py), who has finished which checked exercise, and
the outliers (a number three times the class median, or a third of it: a slow disk, a node
with a busy neighbour). Images are inlined, so the page loads nothing from anywhere.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import json
import math
import os
import pwd
import secrets
import socket
import stat
import time
from pathlib import Path

import pandas as pd

from iolab.core.class_folder import ClassFolder
from iolab.core.errors import LabError
from iolab.core.workspace import results_dir, user_name, workdir
from iolab.measure.context import mount_for

#: A learner's file holds a few readers and checks; anything larger is not one of the lab's.
WALL_FILE_MAX_BYTES = 64 * 1024
WALL_FILE_MODE = 0o640
#: How far from the class median a number must be to be called out on the wall.
OUTLIER_FACTOR = 3.0
#: The readers' columns the wall shows, with their labels (units in the labels).
READER_FIGURES = {"wall_median_s": "warm (s)", "cold_wall_median_s": "cold (s)",
                  "dataset_file_opens": "dataset-file opens", "total_calls": "system calls"}
#: The figures the wall plots as times.
TIME_FIGURES = ["warm (s)", "cold (s)"]
#: What notebook 05 glues from the learner's own fio run on the local disk, with its label.
FIO_FIGURES = {"local_qd1_iops": "4 KiB random reads, depth 1 (IOPS)",
               "local_qd16_iops": "4 KiB random reads, depth 16 (IOPS)",
               "local_seq_read_direct_mibps": "1 MiB sequential reads (MiB/s)"}
FIO_NOTEBOOK = "05-fio"


def own_results() -> dict:
    """What this learner's lab has measured so far: readers (from `make lab`), node, place."""
    readers = {}
    path = results_dir() / "readers.csv"
    if path.is_file():
        table = pd.read_csv(path)
        for row in table.to_dict("records"):
            readers[row["reader"]] = {key: (None if pd.isna(row.get(key)) else float(row[key]))
                                      for key in READER_FIGURES if key in row}
    return {"node": socket.gethostname(), "workspace_fs": mount_for(workdir()).fs_type,
            "readers": readers, "fio": own_fio_figures()}


def own_fio_figures() -> dict[str, float]:
    """Notebook 05's glued figures of this learner's local fio run, once `make lab` has
    executed it; nothing when it showed the recorded run instead (fio missing here)."""
    results = results_dir()
    executed = results / "notebooks" / f"{FIO_NOTEBOOK}.ipynb"
    fallbacks = results / "not-run-here.txt"
    if not executed.is_file() or (fallbacks.is_file() and any(
            line.startswith(f"{FIO_NOTEBOOK}: local:")
            for line in fallbacks.read_text().splitlines())):
        return {}
    figures = {}
    with contextlib.suppress(OSError, ValueError):
        for cell in json.loads(executed.read_text()).get("cells", []):
            for output in cell.get("outputs", []):
                name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                if name in FIO_FIGURES:
                    figures[name] = float(
                        output["data"]["application/papermill.record/text/plain"])
    return figures


def publish(joined: ClassFolder, checks: dict | None = None) -> Path:
    """Write (or update) this learner's file on the wall; returns its path.

    Written beside its final name and renamed over it, so the wall never reads half a file;
    the checks of earlier runs are kept and `checks` added to them.
    """
    target = joined.wall / f"{user_name()}.json"
    earlier = _read(target, os.getuid()) or {}
    record = {**own_results(), "user": user_name(), "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
              "checks": {**earlier.get("checks", {}), **(checks or {})}}
    partial = joined.wall / f".{user_name()}.{secrets.token_hex(8)}.partial"
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, WALL_FILE_MODE)
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), WALL_FILE_MODE)  # the lab's umask keeps files private
            json.dump(record, handle)
        os.replace(partial, target)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise LabError(f"cannot write your results to {target} ({err.strerror}): another "
                       "learner's file may have that name, or the wall is not writable for "
                       "you; tell your instructor") from None
    return target


def _read(path: Path, owner: int) -> dict | None:
    """A wall file's record if it is a regular file of `owner`, small and valid JSON."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != owner \
                or info.st_size > WALL_FILE_MAX_BYTES:
            return None
        try:
            record = json.loads(handle.read())
        except ValueError:
            return None
    return record if isinstance(record, dict) else None


def read_wall(joined: ClassFolder) -> list[dict]:
    """Every learner's record, named by the file's owner (a name someone else chose is not
    trusted); unreadable or foreign-shaped files are left out."""
    records = []
    for entry in sorted(joined.wall.glob("*.json")):
        with contextlib.suppress(OSError):
            owner = entry.lstat().st_uid
            record = _read(entry, owner)
            if record is not None:
                try:
                    record["user"] = pwd.getpwuid(owner).pw_name
                except KeyError:
                    record["user"] = f"uid{owner}"
                records.append(record)
    return records


def figures_frame(records: list[dict]) -> pd.DataFrame:
    """One row per learner, reader and figure: user, node, workspace_fs, reader, figure, value."""
    rows = [{"user": record["user"], "node": str(record.get("node", "?")),
             "workspace_fs": str(record.get("workspace_fs", "?")), "reader": reader,
             "figure": READER_FIGURES[key], "value": value}
            for record in records
            for reader, figures in (record.get("readers") or {}).items()
            if isinstance(figures, dict)
            for key, value in figures.items()
            if key in READER_FIGURES and isinstance(value, (int, float)) and math.isfinite(value)]
    rows += [{"user": record["user"], "node": str(record.get("node", "?")),
              "workspace_fs": str(record.get("workspace_fs", "?")), "reader": "fio",
              "figure": FIO_FIGURES[key], "value": value}
             for record in records
             for key, value in (record.get("fio") or {}).items()
             if key in FIO_FIGURES and isinstance(value, (int, float)) and math.isfinite(value)]
    return pd.DataFrame(rows, columns=["user", "node", "workspace_fs", "reader", "figure",
                                       "value"])


def outliers(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers at least OUTLIER_FACTOR times the class median of their reader and figure, or
    at most its inverse (three learners at least, or a median means little)."""
    if frame.empty:
        return frame.assign(median=[], times_median=[])
    grouped = frame.groupby(["reader", "figure"])["value"]
    with_median = frame.assign(median=grouped.transform("median"),
                               learners=grouped.transform("size"))
    with_median = with_median[(with_median["learners"] >= 3) & (with_median["median"] > 0)]
    ratio = with_median["value"] / with_median["median"]
    flagged = with_median[(ratio >= OUTLIER_FACTOR) | (ratio <= 1 / OUTLIER_FACTOR)]
    return flagged.assign(times_median=(flagged["value"] / flagged["median"]).round(2)).drop(
        columns="learners")


def progress_frame(records: list[dict], exercises: list[str]) -> pd.DataFrame:
    """Learner by checked exercise: "right", "tried" or empty."""
    rows = []
    for record in records:
        checks = record.get("checks") or {}
        row = {"user": record["user"]}
        for key in exercises:
            state = checks.get(key)
            row[key] = "" if not isinstance(state, dict) else (
                "right" if state.get("right") else "tried")
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
        lines.append(f"{reader} {figure}: {value:.3f}, {rank} of {len(group)} "
                     f"(class median {group['value'].median():.3f})")
    return lines


def _png(frame: pd.DataFrame, labels: list[str]) -> str:
    """strip_plot of `labels` as base64 PNG for the page (empty without data)."""
    import matplotlib.pyplot as plt

    from iolab.classmode.wall_plots import strip_plot

    figure = strip_plot(frame, labels)
    if figure is None:
        return ""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def wall_page(joined: ClassFolder, records: list[dict], exercises: list[str]) -> str:
    """The projector page: spread, progress and outliers, self-contained HTML."""
    frame = figures_frame(records)
    image = _png(frame, TIME_FIGURES)
    fio_image = _png(frame, list(FIO_FIGURES.values()))
    flagged = outliers(frame)
    fio_picture = (f'<img alt="the class\'s fio figures" src="data:image/png;base64,{fio_image}">'
                   if fio_image else "<p>No fio figures yet: they arrive when a learner's "
                                     "<code>make lab</code> has run notebook 05 with fio.</p>")
    progress = progress_frame(records, exercises)
    picture = (f'<img alt="the class\'s reader times" src="data:image/png;base64,{image}">'
               if image else "<p>No reader results yet: they arrive when a learner's "
                             "<code>make lab</code> has timed the readers.</p>")
    flagged_html = (flagged[["user", "node", "workspace_fs", "reader", "figure", "value",
                             "median", "times_median"]].to_html(index=False)
                    if not flagged.empty else "<p>None: every number is within a factor of "
                                              f"{OUTLIER_FACTOR:g} of the class median.</p>")
    done = int((progress[exercises] == "right").to_numpy().sum()) if exercises else 0
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="60">
<title>Class wall: {html.escape(joined.name)}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px}} img{{max-width:100%}}</style></head>
<body><h1>Class wall: {html.escape(joined.name)}</h1>
<p>{len(records)} of {joined.learners} learners have results; {done} checked answers right.
Built {time.strftime("%H:%M:%S")}; the page reloads every minute.</p>
<h2>Reader times across the class</h2>{picture}
<h2>fio on each learner's disk</h2>{fio_picture}
<h2>Outliers</h2>{flagged_html}
<h2>Checked exercises (<code>iolab check NN</code>)</h2>{progress.to_html(index=False)}
</body></html>
"""
