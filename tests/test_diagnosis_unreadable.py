"""What the diagnosis cannot read it refuses in one sentence, never a verdict (issue 36, item
1), and its JSON keeps to one documented schema (item 6).

Truncated and byte-flipped copies are made from two small corpus logs, one of each header
layout (3.41, little-endian; 3.00, big-endian from a ppc64 machine), cut inside each region
the header maps: the header, the job record, the file names, a module, and one byte short.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.diagnosis import darshan

needs_darshan = pytest.mark.needs("darshan")
ROOT = Path(__file__).resolve().parents[1]
LOGS = Path(__file__).parent / "fixtures" / "darshan"
NEW = LOGS / "release_logs" / "mpi-io-test-x86_64-3.4.7.darshan"  # format 3.41, 3,284 bytes
OLD = LOGS / "release_logs" / "mpi-io-test-ppc64-3.0.0.darshan"  # format 3.00, 998 bytes
PARTIAL_STDIO = LOGS / "partial_data_stdio" / "partial_data_stdio.darshan"
#: What a report says when it clears a run or lists findings: never after a refusal.
VERDICT_WORDS = ("nothing costs enough", "Diagnosis, costliest first", "all clear")


def command(name: str, *argv: str) -> int:
    from iolab.cli import darshan as darshan_command
    from iolab.cli import diagnose as diagnose_command

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    darshan_command.setup_parser(subparsers)
    diagnose_command.setup_parser(subparsers)
    args = parser.parse_args([name, *argv])
    return args.func(args)


def refused(capsys, path: Path, *commands: str) -> list[str]:
    """Each command's sentence for `path`: a LabError of one line naming it, nothing printed."""
    sentences = []
    for name in commands or ("diagnose", "darshan"):
        with pytest.raises(LabError) as caught:
            command(name, str(path))
        sentence = str(caught.value)
        out = capsys.readouterr().out
        assert "\n" not in sentence and str(path) in sentence, sentence
        assert not any(word in out for word in VERDICT_WORDS), out
        sentences.append(sentence)
    return sentences


def cut_points(log: Path) -> dict[str, int]:
    """Where to cut `log`: inside each region its header maps, and one byte short."""
    head = log.read_bytes()
    regions = darshan.header_map(head, darshan.log_version(head))
    names_at, names_len = regions.names
    module_at, module_len = regions.modules[-1]
    return {
        "header": regions.size // 2,
        "job record": regions.size + 5,
        "file names": names_at + names_len // 2,
        "module": module_at + module_len // 2,
        "last byte": len(head) - 1,
    }


@needs_darshan
@pytest.mark.parametrize("log", [NEW, OLD], ids=["3.41", "3.00-big-endian"])
@pytest.mark.slow
def test_a_log_cut_short_is_refused_naming_what_is_missing(tmp_path, capsys, log) -> None:
    expected = {
        "header": "its header",
        "job record": "the job record",
        "file names": "the file names",
        "module": "module",
        "last byte": "module",
    }
    for where, size in cut_points(log).items():
        cut = tmp_path / f"cut-in-{where.replace(' ', '-')}.darshan"
        cut.write_bytes(log.read_bytes()[:size])
        for sentence in refused(capsys, cut):
            assert "cut short" in sentence and expected[where] in sentence, (where, sentence)


@needs_darshan
def test_the_missing_modules_are_named(tmp_path, capsys) -> None:
    data = NEW.read_bytes()
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(data[: cut_points(NEW)["module"]])
    [sentence] = refused(capsys, cut, "diagnose")
    present = darshan.read_log(NEW).report.modules
    last = max(present, key=lambda name: present[name]["idx"])
    assert f"the {last} module" in sentence and "POSIX" not in sentence


@needs_darshan
@pytest.mark.slow
def test_byte_flipped_copies_are_refused(tmp_path, capsys) -> None:
    """A flip in the magic number, the version, a map of the header or the start of a
    compressed region (zlib's header) is always caught; one inside compressed data may not
    be (Darshan keeps no checksum of a region), so none is tested there."""
    data = NEW.read_bytes()
    regions = darshan.header_map(data, "3.41")
    flips = {
        "magic": 9,
        "version": 2,
        "names map": 32 + 8 + 1,
        "job record": regions.size,
        "file names": regions.names[0],
        "module": regions.modules[0][0],
    }
    for where, offset in flips.items():
        flipped = tmp_path / f"flipped-{where.replace(' ', '-')}.darshan"
        flipped.write_bytes(data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :])
        refused(capsys, flipped)


@needs_darshan
def test_a_libdarshan_crash_or_hang_is_one_sentence(tmp_path, monkeypatch) -> None:
    """The child dies as libdarshan's abort() or a segfault would kill it (exit 134, 139),
    or never answers; the command lives on and names the log."""

    def dies(how: int):
        def child(path: Path) -> None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # pytest's faulthandler would print
            os.kill(os.getpid(), how)

        return child

    for how, code in ((signal.SIGABRT, 134), (signal.SIGSEGV, 139)):
        monkeypatch.setattr(darshan, "_read_here", dies(how))
        with pytest.raises(
            LabError,
            match=rf"{NEW.name} is damaged: libdarshan was killed by "
            rf"{how.name} .*exit {code}",
        ):
            darshan.read_log(NEW)
    monkeypatch.setattr(darshan, "_read_here", lambda path: time.sleep(30))
    monkeypatch.setattr(darshan, "CHILD_TIMEOUT_S", 0.5)
    started = time.monotonic()
    with pytest.raises(LabError, match="took more than 0.5 s and was stopped"):
        darshan.read_log(NEW)
    assert time.monotonic() - started < 10


@needs_darshan
def test_files_that_are_no_log_and_no_trace_are_refused_whatever_their_name(
    tmp_path, capsys
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("results of run 3\nall fine, I think\n")
    empty = tmp_path / "empty.out"
    empty.write_bytes(b"")
    for path in (text, empty):
        [sentence] = refused(capsys, path, "diagnose")
        assert "neither a Darshan log nor an strace trace" in sentence
    for path in (text.rename(tmp_path / "notes.darshan"), empty.rename(tmp_path / "e.darshan")):
        for sentence in refused(capsys, path):
            assert re.search(r"neither a Darshan log|could not be read as a Darshan log", sentence)
    folder = tmp_path / "logs.darshan"
    folder.mkdir()
    fifo = tmp_path / "pipe.darshan"
    os.mkfifo(fifo)  # opened without waiting for a writer: no hang
    assert "a folder" in refused(capsys, folder)[0]
    assert "a FIFO" in refused(capsys, fifo)[0]
    gz = tmp_path / "not-darshan.gz"
    gz.write_bytes(gzip.compress(b"just some text\n"))
    refused(capsys, gz)


@needs_darshan
def test_a_darshan_2_log_is_named_with_what_reads_it(tmp_path, capsys) -> None:
    """Darshan 2.x wrote one gzip stream whose job record starts with the version string."""
    old = tmp_path / "carns_app_id114525_7-27-58921_19.darshan.gz"
    old.write_bytes(gzip.compress(b"2.06\0\0\0\0" + (6567223).to_bytes(8, "little") + bytes(64)))
    for sentence in refused(capsys, old):
        assert "Darshan 2.06 log" in sentence and "darshan-util 2.x" in sentence


@needs_darshan
@pytest.mark.slow
def test_the_command_exits_2_with_one_line_and_no_traceback(tmp_path) -> None:
    cut = tmp_path / "job.darshan"
    cut.write_bytes(NEW.read_bytes()[:2000])
    text = tmp_path / "trace.txt"
    text.write_text("this is not a trace\n")
    for path in (cut, text):
        done = subprocess.run(
            [sys.executable, "-m", "iolab", "diagnose", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            check=False,
        )
        assert done.returncode == 2 and done.stdout == "", done
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr


@needs_darshan
def test_a_partial_module_is_named_and_never_cleared(capsys) -> None:
    """partial_data_stdio: Darshan kept 1,022 STDIO records and marked the module partial."""
    from iolab.diagnosis.facts import Run, empty_records
    from iolab.diagnosis.report import format_findings, verdict

    log = darshan.read_log(PARTIAL_STDIO)
    assert log.incomplete == ("STDIO",) and log.run().incomplete == ("STDIO",)
    assert command("diagnose", str(PARTIAL_STDIO)) == 0
    out = capsys.readouterr().out
    assert "Incomplete log: Darshan ran out of memory for STDIO" in out
    assert "nothing costs enough" not in out
    run = Run("darshan", "job", 1, 10.0, empty_records(), incomplete=("STDIO",))
    assert verdict(run, []) == "incomplete-log"
    text = format_findings([], run)
    assert "cannot clear" in text and "nothing costs" not in text


# ------------------------------------------------------------------------------ the JSON schema

TRACE = """\
4242 execve("/bin/true", ["true"], 0x7ffd3f0 /* 12 vars */) = 0 <0.000150>
4242 exit_group(0)                     = ?
4242 +++ exited with 0 +++
"""


def lesson_schema() -> str:
    text = (ROOT / "lessons" / "12-profiling.md").read_text()
    start = text.index("### What the report refuses, and its JSON")
    return text[start : text.index("\n### ", start + 1)]


def check_types(report: dict, tables: set[str]) -> None:
    """Every field of `report` has the type the lesson's table gives it."""
    from iolab.diagnosis.report import VERDICTS
    from iolab.diagnosis.rules import RULE_IDS

    assert type(report["schema_version"]) is int
    assert isinstance(report["source"], str) and isinstance(report["name"], str)
    assert type(report["processes"]) is int and type(report["run_time_s"]) in (int, float)
    assert all(isinstance(m, str) for m in report["modules"] + report["incomplete_modules"])
    assert all(type(v) in (int, float) for v in report["thresholds"].values())
    assert report["verdict"] in VERDICTS
    assert all(isinstance(v, (str, int, float)) for v in report["job"].values())
    for finding in report["findings"]:
        assert finding["rule"] in RULE_IDS and type(finding["minor"]) is bool
        assert type(finding["cost_s"]) is float and type(finding["counted_elsewhere_s"]) is float
        assert all(rule in RULE_IDS for rule in finding["counted_under"])
        assert all(
            isinstance(finding[k], str) for k in ("title", "evidence", "advice", "cost_formula")
        )
        assert all(isinstance(f, str) for f in finding["files"])
        assert all(type(n) is int for n in finding["ranks"] + finding["osts"])
        assert all(type(v) in (int, float) for v in finding["counters"].values())
    for title in tables:
        assert all(isinstance(row, dict) for row in report[title])


@needs_darshan
@pytest.mark.slow
def test_the_json_has_the_documented_types_and_a_verdict(tmp_path, capsys) -> None:
    from iolab.diagnosis.inputs import from_path

    imbalanced = LOGS / "imbalanced_io" / "imbalanced-io.darshan"
    trace = tmp_path / "trace.txt"
    trace.write_text(TRACE)
    for path, verdict in ((imbalanced, "io-costs-time"), (trace, "nothing-worth-changing")):
        assert command("diagnose", str(path), "--json") == 0
        text = capsys.readouterr().out
        assert '"False"' not in text and '"True"' not in text and "NaN" not in text
        report = json.loads(text)
        check_types(report, set(from_path(path, figures=False).tables))
        assert report["verdict"] == verdict
    assert report["findings"] == [] and report["incomplete_modules"] == []


def test_numpy_values_become_json_types() -> None:
    """What pandas and numpy hand over (numpy booleans and integers, NaN) becomes true/false,
    numbers and null: json.dumps would refuse numpy's, or with default=str write "False"."""
    import numpy as np

    from iolab.diagnosis.report import json_ready

    ready = json_ready(
        {
            "minor": np.bool_(False),
            "ranks": (np.int64(3),),
            "mean": np.float64("nan"),
            "rate": float("inf"),
        }
    )
    assert ready == {"minor": False, "ranks": [3], "mean": None, "rate": None}
    assert type(ready["minor"]) is bool and type(ready["ranks"][0]) is int
    assert json.dumps(ready, allow_nan=False) == (
        '{"minor": false, "ranks": [3], "mean": null, "rate": null}'
    )


def test_the_lesson_documents_every_field_verdict_and_rule_id() -> None:
    from iolab.diagnosis.facts import Run, empty_records
    from iolab.diagnosis.report import REPORTED, VERDICTS, report_dict
    from iolab.diagnosis.rules import RULE_IDS

    schema = lesson_schema()
    rows = re.findall(r"^\| (`[^|]+`) \|", schema, re.MULTILINE)
    fields = {name for row in rows for name in re.findall(r"`([\w_]+)`", row)}
    fields.discard("field")
    report = report_dict(Run("strace", "true", 1, 0.1, empty_records()), [], {})
    assert fields == set(report), set(report) ^ fields
    findings_row = next(line for line in schema.splitlines() if line.startswith("| `findings`"))
    described = set(re.findall(r"`([\w_]+)`", findings_row.split("|")[3]))
    assert set(REPORTED) <= described, set(REPORTED) - described
    ids = schema[schema.index("The rule ids are stable") :]
    assert re.findall(r"`([a-z-]+)`", ids) == list(RULE_IDS)
    verdicts = schema[schema.index("The verdict is") : schema.index("The rule ids")]
    assert re.findall(r"`([a-z-]+)`", verdicts) == list(VERDICTS)
