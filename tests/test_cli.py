"""`python -m iolab`: every command's parser, the renamed flags and the one budget flag, the
syscall counts the issue promises, the lab's safety rules, clean."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import run_script

from iolab.cli import COMMAND_MODULES, build_parser
from iolab.cli import main as cli_main
from iolab.core import budget, cleanup
from iolab.core.cleanup import clean
from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.core.markers import LOCATION_MARKER, MADE_MARKER
from iolab.core.workspace import WorkspaceEntry, location_dir, make_location_dir
from iolab.storage.netmount import loopback_sshfs

ROOT = Path(__file__).resolve().parent.parent
needs_strace = pytest.mark.needs("strace")


def iolab(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iolab", *args],
        cwd=ROOT,
        text=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def notice(old: str, new: str) -> str:
    return f"note: {old} is now {new}; the old name will be removed in the next release\n"


# --- every command's parser, in-process -----------------------------------------------------


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each registered command's own parser, by its name on the command line."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def test_every_registered_command_builds_its_parser() -> None:
    assert len(command_parsers()) == len(COMMAND_MODULES)


@pytest.mark.parametrize(
    "argv",
    [[name, "--help"] for name in command_parsers()]
    + [["lustre", "status", "--help"], ["lustre", "getstripe", "--help"]],
)
def test_help_exits_0_in_process(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main(argv)
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m iolab " + argv[0])


def test_every_command_runs_main_through_func() -> None:
    for name, parser in command_parsers().items():
        func = parser.get_default("func")
        assert func is not None and func.__name__ == "main", name


# --- renamed flags: the old names still work for one release, with a notice ------------------

#: (command line with the old name, the same with the new one, what both must set).
RENAMED = [
    (
        ["time", "--location", "D", "--", "true"],
        ["time", "--data", "D", "--", "true"],
        ("--location", "--data"),
        ("dataset_dir", Path("D")),
    ),
    (
        ["over-sshfs", "--export", "D", "--", "true"],
        ["over-sshfs", "--data", "D", "--", "true"],
        ("--export", "--data"),
        ("dataset_dir", Path("D")),
    ),
    (
        ["hygiene", "df", "--directory", "D"],
        ["hygiene", "df", "--data", "D"],
        ("--directory", "--data"),
        ("dataset_dir", Path("D")),
    ),
    (
        ["syscalls", "--data-dir", "D", "--", "true"],
        ["syscalls", "--data", "D", "--", "true"],
        ("--data-dir", "--data"),
        ("dataset_dir", Path("D")),
    ),
    (
        ["mdrates", "--directory", "D", "--allow-large"],
        ["mdrates", "--directory", "D", budget.FLAG],
        ("--allow-large", budget.FLAG),
        ("compute_node", True),
    ),
]


@pytest.mark.parametrize(
    "old,new,names,expected", RENAMED, ids=[r[2][0] + "-" + r[0][0] for r in RENAMED]
)
def test_an_old_flag_name_still_works_and_says_its_new_name(
    old, new, names, expected, capsys
) -> None:
    attribute, value = expected
    args = build_parser().parse_args(old)
    assert getattr(args, attribute) == value
    assert capsys.readouterr().err == notice(*names)
    args = build_parser().parse_args(new)
    assert getattr(args, attribute) == value
    assert capsys.readouterr().err == ""


def test_old_and_new_name_together_are_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["hygiene", "df", "--data", "A", "--directory", "B"])
    assert done.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


# --- renamed commands: the old names still work for one release, with a notice ---------------

#: (command line with the old name, the same with the new one, the one line it must print).
RENAMED_COMMANDS = [
    (
        ["check", "02", "tar-size", "7485440"],
        ["answer", "02", "tar-size", "7485440"],
        "note: `python -m iolab check` is now `python -m iolab answer`; the old name will be "
        "removed in the next release\n",
    ),
    (
        ["class", "check", "--learners", "25", "--out", "OUT"],
        ["class", "preflight", "--learners", "25", "--out", "OUT"],
        "note: `python -m iolab class check` is now `python -m iolab class preflight`; the old "
        "name will be removed in the next release\n",
    ),
    (
        ["class", "bench", "--learners", "2"],
        ["class", "load-test", "--learners", "2"],
        "note: `python -m iolab class bench` is now `python -m iolab class load-test`; the old "
        "name will be removed in the next release\n",
    ),
]


@pytest.mark.parametrize(
    "old,new,said", RENAMED_COMMANDS, ids=[" ".join(r[0][:2]) for r in RENAMED_COMMANDS]
)
def test_an_old_command_name_still_works_and_says_its_new_name(
    old: list[str], new: list[str], said: str, capsys, monkeypatch
) -> None:
    """The old spelling runs the new command with the same arguments, after one line; the new
    spelling prints nothing more. (The commands' work is replaced by a recorder here.)"""
    import iolab.cli.answer
    import iolab.cli.classroom

    ran: list[dict] = []

    def recorder(args: argparse.Namespace) -> int:
        ran.append({key: value for key, value in vars(args).items() if key != "func"})
        return 0

    monkeypatch.setattr(iolab.cli.answer, "main", recorder)  # set_defaults(func=main) reads it
    for action in ("preflight_main", "load_test_main"):
        monkeypatch.setattr(iolab.cli.classroom, action, recorder)
    assert cli_main(old) == 0
    assert capsys.readouterr().err == said
    assert cli_main(new) == 0
    assert capsys.readouterr().err == ""
    assert len(ran) == 2 and ran[0] == ran[1]


def test_the_old_check_runs_the_real_answer_command(capsys) -> None:
    with pytest.raises(LabError, match="lesson 13 has no exercise with one right answer"):
        cli_main(["check", "13"])
    assert capsys.readouterr().err == RENAMED_COMMANDS[0][2]


def test_only_a_whole_old_name_is_renamed(capsys) -> None:
    """`check-tools` and `class wall` are not `check` and `class check`."""
    from iolab.cli import renamed

    for argv in (["check-tools", "--strict"], ["class", "wall"], ["answer", "02"], ["bench"]):
        assert renamed(argv) == argv
    assert renamed(["class", "check"]) == ["class", "preflight"]
    assert capsys.readouterr().err == RENAMED_COMMANDS[1][2]


def test_help_lists_the_new_names_only(capsys) -> None:
    parsers = command_parsers()
    assert "answer" in parsers and "check" not in parsers
    actions = next(
        a for a in parsers["class"]._actions if isinstance(a, argparse._SubParsersAction)
    )
    assert set(actions.choices) == {
        "preflight",
        "setup",
        "clean",
        "reset",
        "wall",
        "load-test",
        "rehearse",
        "joined",
    }
    with pytest.raises(SystemExit) as done:
        cli_main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "\n  answer " in out and "\n  check " not in out


@pytest.mark.parametrize(
    "argv,expected",
    [
        (
            ["diagnose", "x.darshan", "--json", "--top", "3"],
            {"input": Path("x.darshan"), "command": [], "json": True, "top": 3},
        ),
        (
            ["diagnose", "--json", "--", "python", "t.py", "--json", "--", "x"],
            {"input": None, "command": ["python", "t.py", "--json", "--", "x"], "json": True},
        ),
        (["diagnose", "--", "ls"], {"input": None, "command": ["ls"]}),
        (
            ["profile", "--json", "--", "cat", "--json"],
            {"command": ["cat", "--json"], "json": True},
        ),
        (["syscalls", "--data", "D", "--", "true", "--data"], {"command": ["true", "--data"]}),
        (["over-sshfs", "--data", "D", "--", "ls", "{}"], {"command": ["ls", "{}"]}),
    ],
)
def test_a_command_after_dashes_is_the_programs_whole(argv: list[str], expected: dict) -> None:
    """One parse: the words after `--` are the program's, its options too, and diagnose's own
    options may follow its LOG as well as come before `-- CMD`."""
    args = build_parser().parse_args(argv)
    assert {name: getattr(args, name) for name in expected} == expected


def test_diagnose_refuses_a_log_and_a_command_together() -> None:
    with pytest.raises(LabError, match="give exactly one of"):
        cli_main(["diagnose", "x.darshan", "--", "true"])


@pytest.mark.parametrize(
    "script,args,code",
    [
        ("data_generators/generate_data.py", ["--verify"], 1),
        ("data_generators/create_archive.py", [], 2),
        ("data_generators/make_images.py", ["--verify"], 1),
    ],
)
@pytest.mark.slow
def test_the_generators_take_data_and_still_accept_out(
    script: str, args: list[str], code: int, tmp_path: Path
) -> None:
    for flag in ("--out", "--data"):
        proc = run_script(script, flag, tmp_path / "none", *args, check=False)
        assert proc.returncode == code, proc.stderr
        assert proc.stderr.startswith(notice("--out", "--data")) == (flag == "--out")
        assert "Traceback" not in proc.stderr


def test_the_mpiio_demo_takes_directory_and_still_accepts_out(tmp_path: Path) -> None:
    demo = str(ROOT / "demos" / "mpiio" / "mpiio_demo.py")
    bad_hint = "error: --hint 'x' is not KEY=VALUE, e.g. --hint cb_nodes=2\n"
    for flag, expected in (
        ("--directory", bad_hint),
        ("--out", notice("--out", "--directory") + bad_hint),
    ):
        proc = subprocess.run(
            [sys.executable, demo, flag, str(tmp_path), "--hint", "x"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0 and proc.stderr == expected


# --- one login-node budget, one flag --------------------------------------------------------

#: The commands that have a login-node limit, with the arguments each needs besides the flag.
LIMITED = {
    "fio": [],
    "mdrates": ["--directory", "D"],
    "checkpoint": [],
    "accelerator": [],
    "mpiio": [],
}


@pytest.mark.parametrize("name", LIMITED)
def test_every_limited_command_takes_the_one_budget_flag(name: str) -> None:
    assert build_parser().parse_args([name, *LIMITED[name]]).compute_node is None
    assert build_parser().parse_args([name, *LIMITED[name], budget.FLAG]).compute_node is True


def test_the_budget_flag_means_the_same_everywhere() -> None:
    helps = {
        parser._option_string_actions[budget.FLAG].help
        for name, parser in command_parsers().items()
        if name in LIMITED
    }
    assert len(helps) == 1


@pytest.mark.usefixtures("login_node")
def test_a_refusal_names_the_one_flag_in_process(tmp_path: Path) -> None:
    with pytest.raises(LabError) as refused:
        cli_main(["mdrates", "--directory", str(tmp_path), "-n", "20000", "-P", "2"])
    assert f"pass {budget.FLAG}" in str(refused.value) and "--allow-large" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("login_node")
def test_the_budget_check_is_lifted_by_the_flag(monkeypatch) -> None:
    limit = budget.LIMITS["files"].most
    budget.check("a run", files=limit)
    with pytest.raises(LabError, match=f"{limit + 1} files > {limit} files.*{budget.FLAG}"):
        budget.check("a run", files=limit + 1)
    budget.check("a run", files=limit + 1, compute_node=True)


@pytest.mark.usefixtures("compute_node")
def test_the_budget_check_is_lifted_in_a_batch_job_unless_the_caller_says_otherwise() -> None:
    limit = budget.LIMITS["files"].most
    budget.check("a run", files=limit + 1)
    with pytest.raises(LabError):
        budget.check("a run", files=limit + 1, compute_node=False)


@pytest.mark.slow
@needs_strace
@pytest.mark.parametrize("reader,opens", [("read_files", 7300), ("read_archive", 1)])
def test_dataset_opens_of_the_default_dataset_are_exact(
    default_dataset: Path, reader: str, opens: int
) -> None:
    data = str(default_dataset)
    proc = iolab(
        "syscalls",
        "--data",
        data,
        "--json",
        "--",
        sys.executable,
        f"demos/{reader}.py",
        "--data",
        data,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["method"] == "strace"
    assert report["dataset_opens"] == opens
    # The imports cost far more opens than the archive reader's one data file.
    assert report["other_opens"] > 100


@pytest.mark.slow
def test_fallback_without_strace_still_counts_the_dataset_opens(small_dataset: Path) -> None:
    data = str(small_dataset)
    proc = iolab(
        "syscalls",
        "--data",
        data,
        "--json",
        "--method",
        "fallback",
        "--",
        sys.executable,
        "demos/read_files.py",
        "--data",
        data,
    )
    report = json.loads(proc.stdout)
    assert report["method"] == "audit-hook+proc-io"
    assert report["dataset_opens"] == 37


def test_unusable_workspace_is_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = iolab("lab", env={"IOLAB_WORKDIR": str(blocker / "ws")})
    assert proc.returncode == 2
    assert (
        proc.stderr.startswith("error: cannot create the directory")
        and "Traceback" not in proc.stderr
    )


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every base where clean looks for per-user directories, inside tmp_path: a test's
    clean must never reach the real /tmp/iolab-<user> of a run going on beside it."""
    bases = {name: tmp_path / "bases" / name.lower() for name in cleanup.LOCATION_BASES}
    for name, base in bases.items():
        base.mkdir(parents=True)
        monkeypatch.setenv(name, str(base))
    monkeypatch.setattr(cleanup, "SYSTEM_BASES", ())
    return bases


def test_clean_removes_what_the_lab_wrote_and_nothing_else(
    places: dict[str, Path], workspace: Path, capsys
) -> None:
    marked = make_location_dir(location_dir(places["TMPDIR"]))  # as user_dir makes it
    unmarked = location_dir(places["SCRATCH"])
    hand_marked = location_dir(places["WRKDIR"])
    unmarked.mkdir()
    hand_marked.mkdir()
    (hand_marked / LOCATION_MARKER).write_text("")  # a marker the lab did not write proves nothing
    for entry in WorkspaceEntry:  # made by the lab
        (ensure_writable_dir(entry.path()) / "f").write_text("x")
    (workspace / "my-own-results.txt").write_text("keep")
    assert clean() == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in workspace.iterdir()) == [MADE_MARKER, "my-own-results.txt"]
    assert "left alone" in out and "my-own-results.txt" in out
    assert not marked.exists()
    assert unmarked.is_dir()  # no marker: not the lab's
    assert (hand_marked / LOCATION_MARKER).is_file()
    (workspace / "my-own-results.txt").unlink()
    assert clean() == 0
    assert not workspace.exists()  # an empty workspace the lab made goes too


@pytest.mark.needs("sshfs")
@pytest.mark.usefixtures("places")
def test_clean_unmounts_first_and_never_deletes_through_a_mount(
    tmp_path: Path, workspace: Path
) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "precious.txt").write_text("keep")
    with loopback_sshfs(export) as mount:
        assert (mount.mount_point / "precious.txt").read_text() == "keep"
        clean()
        assert not mount.mount_point.exists()
    assert (export / "precious.txt").read_text() == "keep"
    assert not workspace.exists()


def test_clean_needs_no_third_party_package() -> None:
    """`make clean` runs `python -m iolab clean` even before .venv exists: no pandas, numpy
    or matplotlib may be imported on the way to the clean command."""
    script = (
        "import sys\n"
        "for name in ('pandas', 'numpy', 'matplotlib', 'tqdm'):\n"
        "    sys.modules[name] = None  # importing it now raises ImportError\n"
        "from iolab.cli import build_parser\n"
        "import iolab.cli.clean\n"
        "args = build_parser(full=False).parse_args(['clean'])\n"
        "print(args.func is iolab.cli.clean.main)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "True\n", proc.stderr


#: What a command may import only once it runs: pandas and numpy alone cost about half a
#: second of every start (`python -X importtime`), which a refused option, `--help` and a
#: command that is turned away by the queue or a budget should not pay.
HEAVY_PACKAGES = ("pandas", "numpy", "matplotlib", "scipy", "torch", "darshan", "dask")


def test_every_commands_parser_is_built_without_a_heavy_package() -> None:
    """Options are checked (argparse types, bounds) while the parser runs, before main: so
    building any command's parser and refusing a bad value must not need pandas or numpy."""
    script = (
        "import sys\n"
        f"for name in {HEAVY_PACKAGES!r}:\n"
        "    sys.modules[name] = None  # importing it now raises ImportError\n"
        "from iolab.cli import COMMAND_MODULES, build_parser\n"
        "failed = []\n"
        "for name in COMMAND_MODULES:\n"
        "    try:\n"
        "        build_parser(only=name)\n"
        "    except ImportError as err:\n"
        "        failed.append(f'{name}: {err}')\n"
        "print('\\n'.join(failed))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", "parsers that import a heavy package:\n" + proc.stdout


def cli_without(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Python `code` (which blocks some packages, then runs the command line) in a fresh
    interpreter, with a workspace of this test's own."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "IOLAB_WORKDIR": str(tmp_path / "ws")},
        timeout=60,
    )


def test_a_refused_option_imports_no_heavy_package(tmp_path: Path) -> None:
    """The whole command line, as a learner types it: a value out of range is one sentence,
    and the process never imported pandas or numpy to say so."""
    code = (
        "import sys\n"
        f"for name in {HEAVY_PACKAGES!r}:\n"
        "    sys.modules[name] = None\n"
        "sys.argv = ['iolab', 'mdrates', '--processes', '0']\n"
        "from iolab.cli import run\n"
        "run()\n"
    )
    proc = cli_without(code, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "--processes" in proc.stderr and "pandas" not in proc.stderr, proc.stderr


def test_help_lists_every_command_once_under_its_lesson(capsys) -> None:
    """A new command that no lesson group names would vanish from --help."""
    from iolab.cli import BY_LESSON, COMMAND_MODULES, MODULE_OF

    command_of = {module: command for command, module in MODULE_OF.items()}
    grouped = [name for _, names in BY_LESSON for name in names]
    assert sorted(grouped) == sorted(
        command_of.get(name, name.replace("_", "-")) for name in COMMAND_MODULES
    )
    with pytest.raises(SystemExit) as done:
        cli_main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for lesson, names in BY_LESSON:
        assert f"\n{lesson}:\n" in out
        assert all(f"\n  {name} " in out for name in names), (lesson, names)
    assert "setup_parser" not in out  # written for a learner, not a developer


def test_jupyter_works_on_copies_and_keeps_the_learners_edits(workspace: Path, capsys) -> None:
    """Saving a notebook in JupyterLab must never change the committed reference notebooks."""
    committed = {p.name: p.read_bytes() for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert cli_main(["jupyter", "--no-launch"]) == 0
    copies = workspace / "lab" / "jupyter"
    assert {p.name for p in copies.glob("*.ipynb")} == set(committed)
    first = sorted(committed)[0]
    (copies / first).write_text("the learner's own work")
    os.utime(copies / first, (0, 0))  # older than the committed one
    assert cli_main(["jupyter", "--no-launch"]) == 0
    assert (copies / first).read_text() == "the learner's own work"
    assert first in capsys.readouterr().out.split("newer in notebooks/")[1]
    assert {p.name: p.read_bytes() for p in (ROOT / "notebooks").glob("*.ipynb")} == committed


def test_kernel_sockets_leave_a_workspace_whose_path_is_too_long(monkeypatch) -> None:
    """A Unix socket's path must fit in 107 bytes; a cluster workspace path easily does not
    (the kernel then never answers and `make lab` waits for it until its timeout)."""
    from iolab.core.lab_dirs import SOCKET_PATH_MAX_BYTES, socket_dir
    from iolab.core.owned import discard_owned

    base = Path(tempfile.mkdtemp(prefix="iolab-test-", dir="/tmp"))  # pytest's tmp_path is long
    try:
        (base / "t").mkdir()
        monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir caches its first answer
        monkeypatch.setenv("TMPDIR", str(base / "t"))
        for workspace, expected_parent in (
            (base / "w", base / "w" / "tmp"),
            (base / ("w" * 90), base / "t"),
        ):
            monkeypatch.setenv("IOLAB_WORKDIR", str(workspace))
            folder = socket_dir("kernel", "kernel-65535")
            try:
                assert folder.parent == expected_parent
                assert len(os.fsencode(folder / "kernel-65535")) <= SOCKET_PATH_MAX_BYTES
                assert oct(folder.stat().st_mode & 0o777) == "0o700" and not any(folder.iterdir())
            finally:
                assert discard_owned(folder)
        # the scratch folder first made in the long workspace is gone again
        assert [p.name for p in (base / ("w" * 90) / "tmp").iterdir()] == [".iolab-made"]
    finally:
        discard_owned(base)


def test_an_interrupt_hidden_by_an_extension_import_is_still_one(monkeypatch) -> None:
    """SIGTERM while pandas initialises came out as "ImportError: PyCapsule_Import could not
    import module" with no trace of the interrupt (CI): the handler's record still counts."""
    from iolab.core import errors

    monkeypatch.setattr(errors, "_signalled", [])
    assert errors.interrupt_behind(ImportError("unrelated")) is None
    try:
        try:
            errors._raise_interrupt(15, None)
        except KeyboardInterrupt:
            raise ImportError("PyCapsule_Import could not import module") from None
    except ImportError as hidden:
        assert hidden.__cause__ is None and hidden.__suppress_context__
        assert isinstance(errors.interrupt_behind(hidden), errors.Interrupted)


RUN_CLI_PROGRAM = """
import atexit, sys, threading, time, types
from pathlib import Path
from iolab.core.errors import run_cli
out = Path(sys.argv[1])

class Teardown:
    def __del__(self):  # runs when Python tears its modules down, not after os._exit
        (out / "teardown").write_text("ran")

kept = Teardown()
if "mpi" in sys.argv:  # what leave() looks for; the real module needs an MPI launcher
    sys.modules["mpi4py.MPI"] = types.ModuleType("mpi4py.MPI")

def main():
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    if "thread" in sys.argv:
        threading.Thread(target=lambda: (time.sleep(0.3), (out / "thread").write_text("done"))
                         ).start()
    sys.stdout.write("line\\n" * 100_000)  # more than any pipe or buffer holds
    return 3

run_cli(main, fast_exit="fast" in sys.argv)
"""


@pytest.mark.parametrize(
    "flags, teardown",
    [(["fast"], False), ([], True), (["fast", "thread"], True), (["fast", "mpi"], True)],
)
def test_a_finished_command_skips_only_the_teardown(
    tmp_path: Path, flags: list[str], teardown: bool
) -> None:
    """The `iolab` command ends with os._exit (pandas' teardown is 50 ms of a 0.3 s
    diagnosis): the exit status, every line written and the atexit handlers survive; a running
    non-daemon thread or mpi4py (MPI_Finalize runs in the teardown) keep Python's exit."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_CLI_PROGRAM, str(tmp_path), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.count("line\n") == 100_000
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").exists() == ("thread" in flags)
    assert (tmp_path / "teardown").exists() == teardown


@pytest.mark.parametrize("fast", [True, False])
def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path, fast: bool) -> None:
    """`iolab ... | head` closes the pipe: the command stops quietly with 141, as cat does."""
    from iolab.core.errors import PIPE_CLOSED_EXIT

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN_CLI_PROGRAM, str(tmp_path), *(["fast"] if fast else [])],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.returncode == PIPE_CLOSED_EXIT, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "atexit").read_text() == "ran"


def test_a_missing_package_is_one_sentence_naming_it(tmp_path: Path) -> None:
    """A command run by a Python without the lab's packages (a system python3 before `make
    lab`) says which package and which Python, and how to run it instead: no traceback (its
    parser needs none of them, so the sentence comes when the command starts its work)."""
    code = (
        "import sys; sys.modules['pandas'] = None; sys.argv = ['iolab', 'locations']; "
        "from iolab.cli import run; run()"
    )
    proc = cli_without(code, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: this command needs the Python package pandas, which {sys.executable} cannot "
        "import: run the command with the lab's own Python, `.venv/bin/python -m iolab ...` in "
        "the lab's folder, once `make lab` has built it (in a class: `source CLASS/activate` "
        "first)"
    ]
