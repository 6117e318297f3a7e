"""Results recorded on a described machine, shown where this machine lacks a tool.

A notebook cell that needs strace, fio or a FUSE mount measures live wherever it can. Where
the tool is missing (a login node without fio, a laptop without FUSE access), the cell prints
one sentence saying what is missing and how to get it, and shows instead the result recorded
when the committed notebook was executed, labelled with that machine and date. So the
notebook still runs to the end, and the outputs nbval compares read the same either way.

Recordings live in notebooks/recorded/<notebook>.json, one entry per result. `make record`
re-executes the notebooks with IOLAB_RECORD=1, which saves every live result; nothing is
recorded otherwise, so a learner's runs never change the checkout.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iolab.core.errors import LabError
from iolab.core.workspace import public_text, repo_root
from iolab.measure.context import machine_context, machine_label

#: "1": save every live result into the recordings (what `make record` sets).
RECORD_ENV = "IOLAB_RECORD"
#: A file to which each result shown from a recording adds one line (`make lab` lists them).
FALLBACK_LOG_ENV = "IOLAB_FALLBACK_LOG"


def recordings_dir() -> Path:
    """Where the committed recordings are: notebooks/recorded/ in the checkout."""
    return repo_root() / "notebooks" / "recorded"


def _public(value: Any) -> Any:
    """Every string of a JSON-ready value as a published page shows it (public_text): the
    recordings are committed, so they must not hold the recording checkout's paths."""
    if isinstance(value, str):
        return public_text(value) if "/" in value else value
    if isinstance(value, list):
        return [_public(item) for item in value]
    if isinstance(value, dict):
        return {key: _public(item) for key, item in value.items()}
    return value


def _plain(value: Any) -> Any:
    """NumPy scalars as Python ones, so json can write them (floats keep every digit)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot record a value of type {type(value).__name__}")


def _frame_to_json(frame: pd.DataFrame) -> dict:
    """A frame as plain JSON with its dtypes and index names, so it reads back equal
    (floats keep every digit, unlike DataFrame.to_json)."""
    split = frame.to_dict(orient="split")
    return {
        "columns": list(split["columns"]),
        "index": [list(i) if isinstance(i, tuple) else i for i in split["index"]],
        "index_names": list(frame.index.names),
        "data": split["data"],
        "dtypes": [str(t) for t in frame.dtypes],
    }


def _frame_from_json(value: dict) -> pd.DataFrame:
    names = value["index_names"]
    index = (
        pd.MultiIndex.from_tuples([tuple(i) for i in value["index"]], names=names)
        if len(names) > 1
        else pd.Index(value["index"], name=names[0])
    )
    frame = pd.DataFrame(value["data"], columns=value["columns"], index=index)
    return frame.astype(dict(zip(value["columns"], value["dtypes"], strict=True)))


_KINDS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "frame": (_frame_to_json, _frame_from_json),
    "text": (str, str),
    "data": (lambda value: value, lambda value: value),
}


class Recordings:
    """The recorded results of one notebook: measure live, or show the recording.

    Each method takes the result's key, a function that measures it live, and `missing`:
    None when the tool it needs is here, else the sentence that says what is missing.
    """

    def __init__(self, notebook: str, directory: Path | None = None) -> None:
        self.notebook = notebook
        self.path = (directory or recordings_dir()) / f"{notebook}.json"

    def frame(
        self, key: str, measure: Callable[[], pd.DataFrame], missing: str | None
    ) -> pd.DataFrame:
        """A table measured live, or the recorded one."""
        return self._live_or_recorded("frame", key, measure, missing)

    def text(self, key: str, measure: Callable[[], str], missing: str | None) -> str:
        """A tool's printed output, live or recorded."""
        return self._live_or_recorded("text", key, measure, missing)

    def data(self, key: str, measure: Callable[[], Any], missing: str | None) -> Any:
        """A JSON-ready value (a tool's parsed JSON, a dict of counts), live or recorded."""
        return self._live_or_recorded("data", key, measure, missing)

    def recorded(self, key: str) -> dict:
        """The stored entry for `key`: kind, value, machine and date."""
        entries = self._load()
        if key not in entries:
            raise LabError(
                f"no recorded result '{key}' in {self.path}; run this notebook on a "
                "machine that has the tools it needs, with `make record`"
            )
        return entries[key]

    def _live_or_recorded(
        self, kind: str, key: str, measure: Callable[[], Any], missing: str | None
    ) -> Any:
        to_json, from_json = _KINDS[kind]
        if missing is None:
            value = measure()
            if os.environ.get(RECORD_ENV) == "1":
                self._save(
                    key,
                    {
                        "kind": kind,
                        "value": _public(to_json(value)),
                        "machine": machine_label(machine_context(tools=())),
                        "date": datetime.date.today().isoformat(),
                    },
                )
            return value
        entry = self.recorded(key)
        print(
            f"{missing.rstrip('.')}; shown instead: the result recorded on {entry['date']} "
            f"on {entry['machine']}."
        )
        log_fallback(self.notebook, key, missing)
        return from_json(entry["value"])

    def _load(self) -> dict:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            raise LabError(
                f"cannot read the recordings {self.path} ({err}); restore it with "
                f"`git checkout -- {self.path.name}` in notebooks/recorded"
            ) from None

    def _save(self, key: str, entry: dict) -> None:
        """Add one entry, replacing the file atomically (an interrupted save keeps the old one)."""
        entries = self._load()
        entries[key] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(
            prefix=self.path.name, suffix=".partial", dir=self.path.parent
        )
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                # Keys in a stable order; inside a value the order is the result's own.
                json.dump(dict(sorted(entries.items())), out, indent=1, default=_plain)
                out.write("\n")
            os.chmod(partial, 0o644)
            os.replace(partial, self.path)
        finally:
            Path(partial).unlink(missing_ok=True)


def log_fallback(notebook: str, key: str, reason: str) -> None:
    """Note a result `notebook` showed from a recording instead of measuring it, and why,
    where `make lab` asked for the list (its summary's "Not measured on this machine")."""
    log = os.environ.get(FALLBACK_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{notebook}: {key}: {reason.rstrip('.')}\n")
