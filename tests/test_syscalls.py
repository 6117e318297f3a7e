"""Syscall counting: real strace runs on a tiny dataset, the fallback, and the CLI.

Only the line parsers are fed fixed text, and that text was captured from strace 6.1 on
the development machine; everything else traces real processes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.cli import syscalls as syscalls_command
from iolab.core.errors import LabError
from iolab.core.markers import MADE_MARKER
from iolab.core.workspace import repo_root
from iolab.measure import audit_open
from iolab.measure.strace_parse import TraceReader, parse_strace_summary, unescape_strace
from iolab.measure.strace_run import strace_status
from iolab.measure.syscall_report import format_report
from iolab.measure.syscalls import _Tally, count_syscalls, strace_summary, trace_attributed

needs_strace = pytest.mark.needs("strace")

# Opens every file under argv[1] once (sorted os.walk), reads it whole, and tries one
# missing file, so a failed open must not count as an open.
READER = """
import os, sys
root = sys.argv[1]
for folder, dirs, files in os.walk(root):
    dirs.sort()
    for name in sorted(files):
        with open(os.path.join(folder, name), "rb") as fh:
            fh.read()
try:
    open(os.path.join(root, "missing.csv"))
except OSError:
    pass
print("read all")
"""

FILES = {
    "day 1.csv": "a,b\n1,2\n",
    "day 2.csv": "a,b\n3,4\n5,6\n",
    "day 3.csv": "x\n" * 50,
    "day 4.csv": ",hour,activity_level\n0,0,3\n",
    "month 2/day 5.csv": "a\n" * 7,
}
TOTAL_BYTES = sum(len(text) for text in FILES.values())


@pytest.fixture(autouse=True)
def workspace(workspace):
    """Each test gets its own workspace (conftest); trace files must be gone when it ends."""
    ws = workspace
    yield ws
    leftovers = (
        [p for p in (ws / "tmp").glob("*") if p.name != MADE_MARKER]
        if (ws / "tmp").exists()
        else []
    )
    assert leftovers == [], f"scratch files left behind: {leftovers}"


@pytest.fixture
def data(tmp_path) -> Path:
    root = tmp_path / "data set"
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def python_reader(data: Path) -> list[str]:
    return [sys.executable, "-c", READER, str(data)]


# ----------------------------------------------------------------------- parsers, on captured lines

CAPTURED_TRACE = (
    """\
3084  openat(AT_FDCWD</tmp/sx>, "d ir/f1.csv", O_RDONLY|O_CLOEXEC) = 3</tmp/sx/d ir/f1.csv>
3084  lseek(3</tmp/sx/d ir/f1.csv>, 0, SEEK_CUR <unfinished ...>
3085  read(4</tmp/sx/d ir/f2.csv>,  <unfinished ...>
3084  <... lseek resumed>)              = 0
3085  <... read resumed>"h"..., 9)      = 8
3083  openat(AT_FDCWD</tmp/sx>, "d ir", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3</tmp/sx/d ir>
3083  getdents64(3</tmp/sx/d ir>, 0x55fa98c0ace0 /* 6 entries */, 32768) = 168
3083  openat(AT_FDCWD</tmp/sx>, "d ir/nope", O_RDONLY|O_CLOEXEC) \
= -1 ENOENT (No such file or directory)
3277  openat(AT_FDCWD</tmp/sx>, "d ir/p)ar = x", O_RDONLY|O_CLOEXEC) = 3</tmp/sx/d ir/p)ar = x>
"""
    # Raw from here on, for strace's own escapes (\76, \303\251).
    r"""3277  read(3</tmp/sx/d ir/a\76b>, "z", 2) = 1
3277  close(3</tmp/sx/d ir/caf\303\251>) = 0
4320  read(3<pipe:[8493]>, "a"..., 2)   = 2
3625  mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f6bfa81c000
3625  access("/etc/ld.so.preload", R_OK) = -1 ENOENT (No such file or directory)
4320  newfstatat(AT_FDCWD</tmp>, "sx/d ir/f1.csv", {st_mode=S_IFREG|0644, st_size=8, ...}, 0) = 0
"""
).splitlines(keepends=True)

CAPTURED_SUMMARY = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 40.00    0.000040           1        27           read
 30.00    0.000030           1        25           close
  0.00    0.000000           0        13        13 ioctl
 30.00    0.000030           0        50        25 openat
------ ----------- ----------- --------- --------- ----------------
100.00    0.000100           0       115        38 total
""".splitlines(keepends=True)


def test_trace_reader_joins_unfinished_calls_and_keeps_odd_paths():
    reader = TraceReader()
    calls = list(reader.calls(CAPTURED_TRACE))
    assert len(calls) == 13 and reader.unparsed == 0  # 15 lines, 2 calls split in halves
    resumed_read = next(c for c in calls if c.syscall == "read" and c.pid == "3085")
    assert resumed_read.ret == 8 and resumed_read.args[0] == "4</tmp/sx/d ir/f2.csv>"
    odd = next(c for c in calls if c.syscall == "openat" and "p)ar" in c.args[1])
    assert odd.args[2] == "O_RDONLY|O_CLOEXEC" and odd.ret == 3
    assert unescape_strace(r"caf\303\251") == "café"
    assert unescape_strace(r"a\76b q\"uote") == 'a>b q"uote'


def test_tally_attributes_captured_lines():
    tally = _Tally(("/tmp/sx/d ir",), "/tmp/sx")
    for call in TraceReader().calls(CAPTURED_TRACE):
        tally.add(call)
    assert tally.numbers["dataset_opens"] == 2  # f1.csv and "p)ar = x"; the failed open is not one
    assert tally.numbers["dataset_dir_opens"] == 1
    assert dict(tally.open_counts) == {"f1.csv": 1, "p)ar = x": 1}
    assert tally.numbers["dataset_reads"] == 2 and tally.numbers["dataset_bytes_read"] == 9
    assert tally.numbers["dataset_seeks"] == 1
    assert tally.numbers["dataset_stats"] == 1  # newfstatat relative to AT_FDCWD</tmp>
    targets = {(name, target): n for (name, target), n in tally.by_syscall.items()}
    assert targets[("openat", "dataset")] == 4
    assert targets[("read", "no_path")] == 1  # the pipe
    assert targets[("mmap", "no_path")] == 1
    assert targets[("access", "other_files")] == 1
    assert targets[("close", "dataset")] == 1


def test_summary_parser_handles_blank_errors_and_drops_total():
    frame = parse_strace_summary(CAPTURED_SUMMARY)
    assert list(frame.columns) == [
        "syscall",
        "calls",
        "errors",
        "time_pct",
        "time_s",
        "usecs_per_call",
    ]
    assert list(frame["syscall"]) == ["openat", "read", "close", "ioctl"]
    assert frame.set_index("syscall").loc["read", "errors"] == 0
    assert frame.set_index("syscall").loc["openat", "errors"] == 25
    assert frame["calls"].sum() == 115


# --------------------------------------------------------------------------- strace, real runs


@needs_strace
@pytest.mark.parametrize("relative", [False, True], ids=["absolute-path", "relative-path"])
def test_python_reader_opens_each_file_once(data, relative):
    arg = data.name if relative else str(data)
    cmd = [sys.executable, "-c", READER, arg]
    att = trace_attributed(cmd, data, cwd=data.parent)
    assert att.exit_code == 0 and att.stdout == "read all\n"
    assert att.dataset_opens == 5
    assert att.dataset_open_counts == {name: 1 for name in FILES}
    assert att.dataset_dir_opens == 2  # os.walk lists the root and "month 2"
    assert att.dataset_bytes_read == TOTAL_BYTES
    assert att.dataset_reads >= 5 and att.dataset_stats >= 5
    assert att.other_calls > 100  # the interpreter starting up
    assert att.unparsed_lines == 0
    opens = att.by_syscall.query("syscall == 'openat' and target == 'dataset'")["calls"].sum()
    assert opens == 5 + 2 + 1  # files, directories, and the failed open of missing.csv
    assert att.total_calls == att.dataset_calls + att.other_calls


@needs_strace
def test_cat_and_children_of_a_shell(data):
    one = trace_attributed(["cat", str(data / "day 3.csv")], data)
    assert one.dataset_opens == 1 and one.dataset_bytes_read == len(FILES["day 3.csv"])
    shell = trace_attributed(
        ["sh", "-c", "cat 'day 1.csv' >/dev/null; cat 'day 2.csv' >/dev/null"], data, cwd=data
    )
    assert shell.dataset_opens == 2  # -f follows the two cat processes
    assert shell.dataset_open_counts == {"day 1.csv": 1, "day 2.csv": 1}


@pytest.mark.slow
@needs_strace
def test_imports_are_not_dataset_calls(data):
    att = trace_attributed([sys.executable, "-c", "import pandas"], data)
    assert att.dataset_calls == 0 and att.dataset_opens == 0
    assert att.other_opens > 100  # modules and shared libraries


@needs_strace
def test_summary_of_a_real_run():
    frame = strace_summary([sys.executable, "-c", "print('hi')"])
    assert {"openat", "read", "close"} <= set(frame["syscall"])
    assert "total" not in set(frame["syscall"])
    assert frame["calls"].dtype.kind == "i" and frame["calls"].is_monotonic_decreasing
    assert frame.attrs["stdout"] == "hi\n" and frame.attrs["exit_code"] == 0


@needs_strace
def test_count_syscalls_with_strace_mirrors_attribution(data):
    report = count_syscalls(python_reader(data), data, method="strace")
    assert report.method == "strace"
    assert report.dataset_opens == 5 and report.dataset_bytes_read == TOTAL_BYTES
    assert report.read_syscalls >= report.dataset_reads
    assert report.chars_read is None  # strace cannot know, so it is not a zero


# --------------------------------------------------------------------------- without strace


def test_fallback_counts_python_opens_from_inside(data):
    report = count_syscalls(python_reader(data), data, method="fallback")
    assert report.method == "audit-hook+proc-io" and "fallback method was asked for" in report.note
    assert report.exit_code == 0 and report.stdout == "read all\n"
    assert report.dataset_opens == 5
    assert report.dataset_open_counts == {name: 1 for name in FILES}
    assert report.dataset_dir_opens == 2
    assert report.read_syscalls > 0 and report.chars_read >= TOTAL_BYTES
    assert report.dataset_reads is None and report.dataset_calls is None and report.by_syscall.empty


def test_fallback_runs_scripts_as_main_with_their_exit_code(data, tmp_path):
    script = tmp_path / "reader.py"
    script.write_text(READER + "raise SystemExit(3)\n")
    report = count_syscalls([sys.executable, str(script), str(data)], data, method="fallback")
    assert report.exit_code == 3 and report.dataset_opens == 5


def test_fallback_for_other_programs_reports_unknown_opens(data):
    report = count_syscalls(["cat", str(data / "day 1.csv")], data, method="fallback")
    assert report.method == "proc-io"
    assert report.dataset_opens is None and report.to_json_dict()["dataset_opens"] is None
    assert report.read_syscalls > 0 and report.stdout == FILES["day 1.csv"]


def test_missing_strace_is_explained_and_auto_falls_back(data, tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    status = strace_status()
    assert not status.available and "apt-get install strace" in status.reason
    report = count_syscalls(python_reader(data), data)
    assert report.method == "audit-hook+proc-io" and "strace is not installed" in report.note
    assert report.dataset_opens == 5
    with pytest.raises(LabError, match="module load strace"):
        count_syscalls(python_reader(data), data, method="strace")


# A process that strace already traces may not be traced again: a real ptrace denial.
DENIED_PROBE = """
import json, sys
from iolab.measure.syscalls import count_syscalls, strace_status
status = strace_status()
report = count_syscalls([sys.executable, "-c", sys.argv[1], sys.argv[2]], sys.argv[2])
print(json.dumps([status.available, status.reason, report.method, report.note, \
report.dataset_opens]))
"""


@pytest.mark.slow
@needs_strace
def test_ptrace_denied_is_explained_and_auto_falls_back(data):
    outer = [
        strace_status().path,
        "-f",
        "-qq",
        "-o",
        os.devnull,
        "--",
        sys.executable,
        "-c",
        DENIED_PROBE,
        READER,
        str(data),
    ]
    run = subprocess.run(outer, cwd=repo_root(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    available, reason, method, note, opens = json.loads(run.stdout)
    assert not available and "may not trace processes here" in reason and "ptrace" in reason
    assert method == "audit-hook+proc-io" and "may not trace processes here" in note
    assert opens == 5


# --------------------------------------------------------------------------- command line


def cli(argv: list[str]) -> tuple[argparse.Namespace, int]:
    parser = argparse.ArgumentParser(prog="iolab")
    syscalls_command.setup_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args, args.func(args)


def test_cli_json_is_one_object(data, capsys):
    _, code = cli(["syscalls", "--data", str(data), "--json", "--", *python_reader(data)])
    captured = capsys.readouterr()
    assert code == 0 and captured.out.count("\n") == 1
    result = json.loads(captured.out)
    assert {
        "method",
        "note",
        "command",
        "dataset_dir",
        "dataset_opens",
        "dataset_dir_opens",
        "dataset_calls",
        "other_calls",
        "total_calls",
        "dataset_reads",
        "dataset_bytes_read",
        "dataset_seeks",
        "dataset_stats",
        "by_syscall",
        "exit_code",
    } <= set(result)
    assert result["dataset_opens"] == 5 and result["command"][0] == sys.executable
    assert "read all" in captured.err  # the command's own output goes to stderr


def test_cli_table_is_readable(data, capsys):
    _, code = cli(
        ["syscalls", "--data", str(data), "--method", "fallback", "--", *python_reader(data)]
    )
    out = capsys.readouterr().out
    assert code == 0 and "file opens" in out and "n/a" in out


@needs_strace
def test_format_report_shows_busiest_calls(data):
    text = format_report(count_syscalls(["cat", str(data / "day 1.csv")], data))
    assert "busiest traced system calls" in text and "openat" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--"], "no command to measure"),
        (["--", "no-such-command-xyz"], "was not found"),
    ],
)
def test_cli_errors_say_how_to_fix(data, argv, message):
    with pytest.raises(LabError, match=message):
        cli(["syscalls", "--data", str(data), *argv])


def test_cli_missing_data_dir(tmp_path):
    with pytest.raises(LabError, match="does not exist"):
        cli(["syscalls", "--data-dir", str(tmp_path / "nowhere"), "--", "true"])


def test_cli_old_data_dir_name_still_works_with_a_notice(data, capsys):
    args, code = cli(
        ["syscalls", "--data-dir", str(data), "--method", "fallback", "--", *python_reader(data)]
    )
    assert code == 0 and args.dataset_dir == data
    assert "--data-dir is now --data" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--data", "--data-dir"])
def test_audit_wrapper_takes_data_and_its_old_name(flag):
    parsed = audit_open._parse([flag, "D", "--out", "F", "--bookkeeping", "a,b", "--", "x.py", "1"])
    assert parsed == ("D", "F", ("a", "b"), ["x.py", "1"])


def test_audit_wrapper_refuses_an_option_without_its_value():
    with pytest.raises(SystemExit, match="usage: audit_open.py"):
        audit_open._parse(["--data", "D", "--out", "--", "x.py"])
