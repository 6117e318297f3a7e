"""Every shell command a lesson shows with the lab's paths runs as printed, both from a
checkout and from a learner's class workspace (issue 37, item 4).

A lesson's `bash` block that names `workspace/` or `demos/` depends on where the learner
stands, so it is run twice, by bash with `set -e -o pipefail`: in a checkout (its demos/ and a
workspace holding the dataset), and in a class, after `source DIR/activate` exactly as a
learner joins (which goes into their workspace). A block that cannot run in a test says why,
in a comment right above it (`% shown, not run here: ...`); a block with neither the lab's
paths nor such a comment is a template (`my_script.py`, `$DIR`, `lfs` on your own files)
and is not run. Blocks are found by parsing the lessons, so a new one is covered at once.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from class_stand_ins import linked_environment

from iolab.classmode import setup as class_setup
from iolab.core import lesson_paths
from iolab.core.builder import build_dataset, run_generator
from iolab.core.class_folder import CLASS_ENV
from iolab.core.lesson_paths import join_links

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]-*.md"))
FENCE = re.compile(
    r"^(?P<fence>`{3,})(?:bash|sh|console|shell)[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.S | re.M,
)
NOT_RUN = re.compile(r"^% shown, not run here: (?P<why>\S.*)$")
LAB_PATHS = re.compile(r"(?<![\w/.$-])(workspace|demos)/")


@dataclass(frozen=True)
class Block:
    """One shell block of a lesson."""

    lesson: str
    line: int
    body: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.lesson}:{self.line}"


def lesson_blocks() -> list[Block]:
    """The shell blocks of every lesson, with the comment above each if it has one."""
    blocks = []
    for lesson in LESSONS:
        text = lesson.read_text()
        for found in FENCE.finditer(text):
            before = [line for line in text[: found.start()].splitlines() if line.strip()]
            comment = NOT_RUN.match(before[-1]) if before else None
            blocks.append(
                Block(
                    lesson.name,
                    text.count("\n", 0, found.start()) + 1,
                    found["body"],
                    comment["why"] if comment else None,
                )
            )
    return blocks


BLOCKS = lesson_blocks()
RUN = [block for block in BLOCKS if LAB_PATHS.search(block.body) and block.not_run is None]


#: The tool areas (tests/conftest.py) a block's commands need: without the tool the block
#: is skipped with its package's name, as every test of that area is.
TOOL_AREAS = {"strace": re.compile(r"(?:^|[|;&(]\s*)strace\b|iolab syscalls", re.M)}
CASES = [
    pytest.param(
        block,
        id=block.name,
        marks=[
            pytest.mark.needs(area) for area, used in TOOL_AREAS.items() if used.search(block.body)
        ],
    )
    for block in RUN
]


def test_the_lessons_show_blocks_and_the_lab_paths_are_found() -> None:
    """The parser finds the blocks this test is about (it cannot pass by finding none)."""
    assert len(BLOCKS) >= 40
    names = {block.name.split(":")[0] for block in RUN}
    assert {"01-file-access.md", "02-small-files.md", "03-random-access.md"} <= names
    assert any("python demos/read_files.py --data workspace/dataset" in b.body for b in RUN)
    assert [block.not_run for block in BLOCKS if block.not_run is not None], "no reason parsed"


#: Days in the class's dataset here: January and February 2004, the months the lessons list.
DAYS = 60


def small_class_data(root: Path) -> None:
    """The class's datasets made by the same generators as build_data makes them, but
    smaller (DAYS days, 16 image samples): what is under test is where the lessons' commands
    lead, not how much they read (test_class_setup builds a class's data whole)."""
    build_dataset(root / "dataset", files=DAYS)
    run_generator("make_shards.py", root / "dataset")
    run_generator("make_images.py", root / "images", "--count", "16")
    for script, data in (
        ("generate_data.py", root / "dataset"),
        ("make_shards.py", root / "dataset"),
        ("make_images.py", root / "images"),
    ):
        run_generator(script, data, "--verify")  # build_data's own checks, as a class runs them


@pytest.fixture(scope="module")
def dataset_class(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real class (datasets generated and verified, smaller than a workshop's), its
    environment linked to this test's interpreter."""
    root = tmp_path_factory.mktemp("lesson-class") / "lessons-day"

    def environment(root: Path, python: str) -> None:
        linked_environment(root, python)
        # MPICH's launcher and its proxy, beside each other as in the real environment
        for found in Path(sys.executable).parent.glob("*"):
            if found.name.startswith(("mpi", "hydra")):
                (root / "env" / "bin" / found.name).symlink_to(found)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(class_setup, "build_environment", environment)
        patch.setattr(class_setup, "build_data", small_class_data)
        patch.delenv(CLASS_ENV, raising=False)
        class_setup.setup_class(root, 2, say=lambda text: None)
    return root


@pytest.fixture(scope="module")
def checkout(dataset_class: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout as the set-up page leaves it after `make lab`: demos/, and the workspace
    moved to scratch (IOLAB_WORKDIR) with the dataset and the scratch folder tmp/, reached
    through the link `workspace` that `make lab` puts into the checkout."""
    top = tmp_path_factory.mktemp("lesson-checkout")
    shutil.copytree(ROOT / "demos", top / "demos")
    work = tmp_path_factory.mktemp("scratch") / "iolab-work"
    (work / "tmp").mkdir(mode=0o700, parents=True)
    for name in ("dataset", "images"):
        shutil.copytree(dataset_class / name, work / name, symlinks=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IOLAB_WORKDIR", str(work))
        patch.delenv(CLASS_ENV, raising=False)
        patch.setattr(lesson_paths, "repo_root", lambda: top)
        said = lesson_paths.link_checkout_workspace()
    assert said is not None and "linked" in said
    assert (top / "workspace").resolve() == work
    return top


def _environment(home: Path) -> dict[str, str]:
    """What a learner's shell has: no class, no workspace override, a scratch folder, and
    every place the lab compares (clean's bases) inside this test's folder."""
    from iolab.core.cleanup import LOCATION_BASES

    env = {k: v for k, v in os.environ.items() if k not in (CLASS_ENV, "IOLAB_WORKDIR")}
    for variable in LOCATION_BASES:
        base = home / "places" / variable.lower()
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        env[variable] = str(base)
    env.update(HOME=str(home), MPLBACKEND="Agg")
    return env


#: A learner's `iolab clean` in the class.
#: (/tmp and /dev/shm are left out: the lab's real places there may serve a test beside this
#: one; every other base is this test's own, see _environment.)
CLEAN = (
    'source "{root}/activate" >/dev/null 2>&1\n'
    'python -c "from iolab.core import cleanup; cleanup.SYSTEM_BASES = (); '
    'raise SystemExit(cleanup.clean())"'
)


def _run(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`script` by bash, stopped at the first failing command (a pipeline's last; a path
    the lessons name wrongly still shows in standard error, see _ran_as_printed)."""
    with subprocess.Popen(
        ["bash", "-c", "set -e\n" + script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as shell:
        try:
            out, err = shell.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            os.killpg(shell.pid, signal.SIGKILL)  # mpiexec and its ranks too
            out, err = shell.communicate()
            err += "\n(stopped after 600 s)"
    return subprocess.CompletedProcess(shell.args, shell.returncode, out, err)


def _said(done: subprocess.CompletedProcess[str]) -> str:
    out, err = done.stdout[-3000:], done.stderr[-3000:]
    return f"exit {done.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"


#: What standard error holds when a command of a pipeline failed (`| head` hides its exit).
#: (A traced call's own ENOENT, "(No such file or directory)", is what lesson 01 shows.)
FAILED = re.compile(r"(?<!\()No such file or directory|^Traceback|command not found|^error:", re.M)


def _ran_as_printed(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == 0 and not FAILED.search(done.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("block", CASES)
def test_a_lesson_command_runs_as_printed_from_a_checkout(
    block: Block, checkout: Path, tmp_path: Path
) -> None:
    env = _environment(tmp_path)
    env["IOLAB_WORKDIR"] = str((checkout / "workspace").resolve())  # as in ~/.bashrc
    bin_dir = str(Path(sys.executable).parent)  # as `source .venv/bin/activate` does
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    done = _run(block.body, checkout, env)
    assert _ran_as_printed(done), f"{block.name} failed from a checkout: {_said(done)}"


@pytest.mark.slow
@pytest.mark.parametrize("block", CASES)
def test_a_lesson_command_runs_as_printed_from_a_class_workspace(
    block: Block, dataset_class: Path, tmp_path: Path
) -> None:
    env = _environment(tmp_path)
    done = _run(f'source "{dataset_class}/activate" >/dev/null\n{block.body}', tmp_path, env)
    assert _ran_as_printed(done), f"{block.name} failed from a class workspace: {_said(done)}"


def test_joining_lays_the_workspace_out_like_a_checkout_and_clean_removes_it(
    dataset_class: Path, tmp_path: Path
) -> None:
    """`source activate` goes into the workspace, whose links lead to the class's copies;
    `iolab clean` removes the links (never what they lead to) and the workspace."""
    env = _environment(tmp_path)
    done = _run(f'source "{dataset_class}/activate"\npwd\nls -l', tmp_path, env)
    assert done.returncode == 0, _said(done)
    workspace = Path(done.stdout.splitlines()[0])
    assert tmp_path in workspace.parents and workspace.name.startswith("iolab-lessons-day-")
    assert "the lessons' commands run as printed from your workspace" in done.stderr
    for name in ("demos", "dataset", "images", "workspace"):
        assert (workspace / name).is_symlink(), name
    assert (workspace / "workspace" / "dataset" / "data.tar").samefile(
        dataset_class / "dataset" / "data.tar"
    )
    assert (workspace / "demos" / "read_files.py").samefile(
        dataset_class / "lab" / "demos" / "read_files.py"
    )
    before = sorted(p.name for p in (dataset_class / "dataset").iterdir())
    done = _run(
        f'source "{dataset_class}/activate" >/dev/null 2>&1\npython -m iolab clean', tmp_path, env
    )
    assert done.returncode == 0, _said(done)
    assert not workspace.exists(), done.stdout
    assert sorted(p.name for p in (dataset_class / "dataset").iterdir()) == before


def test_a_name_taken_in_the_workspace_is_left_alone_and_named(
    dataset_class: Path, tmp_path: Path
) -> None:
    """A learner's own `demos` folder is kept; joining says so, and clean keeps it too."""
    env = _environment(tmp_path)
    _run(f'source "{dataset_class}/activate" >/dev/null 2>&1', tmp_path, env)
    workspace = next(tmp_path.rglob("iolab-lessons-day-*"))
    (workspace / "demos").unlink()
    (workspace / "demos").mkdir()
    (workspace / "demos" / "mine.py").write_text("print('mine')\n")
    (workspace / "images").unlink()
    (workspace / "images").symlink_to("/")  # the learner's own link elsewhere
    done = _run(f'source "{dataset_class}/activate"', tmp_path, env)
    assert done.returncode == 0, _said(done)
    assert "note: demos, images in your workspace is something else" in done.stderr
    done = _run(
        f'source "{dataset_class}/activate" >/dev/null 2>&1\npython -m iolab clean', tmp_path, env
    )
    assert (workspace / "demos" / "mine.py").is_file(), done.stdout
    assert os.readlink(workspace / "images") == "/"
    assert not (workspace / "dataset").exists() and not (workspace / "workspace").exists()
    assert "left alone" in done.stdout and "demos" in done.stdout


def test_the_links_are_the_ones_the_lessons_need() -> None:
    """Every top-level name the run blocks use is a join link (a new one must be added)."""
    used = {found[1] for block in RUN for found in LAB_PATHS.finditer(block.body)}
    assert used <= set(join_links_names())


def join_links_names() -> list[str]:
    from iolab.core.class_folder import ClassFolder

    return list(join_links(ClassFolder(Path("/c"), "c", 1, 1, "home", "me")))


def test_a_moved_workspace_gets_a_link_in_the_checkout_and_clean_removes_only_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IOLAB_WORKDIR on scratch: the checkout's `workspace` leads there, once; a learner's own
    `workspace` entry is kept and named; `clean` removes the lab's link, never its target."""
    from iolab.core import cleanup

    for variable in cleanup.LOCATION_BASES:  # clean's other places: this test's own
        monkeypatch.setenv(variable, str(tmp_path / "places"))
    monkeypatch.setattr(cleanup, "SYSTEM_BASES", ())
    top, work = tmp_path / "storage-lab", tmp_path / "scratch" / "iolab-work"
    top.mkdir()
    monkeypatch.setenv("IOLAB_WORKDIR", str(work))
    monkeypatch.delenv(CLASS_ENV, raising=False)
    monkeypatch.setattr(lesson_paths, "repo_root", lambda: top)
    assert lesson_paths.link_checkout_workspace() is None  # no workspace yet: no link to it
    assert not os.path.lexists(top / "workspace")
    work.mkdir(parents=True)
    assert lesson_paths.link_checkout_workspace() == (
        f"linked {top / 'workspace'} to your workspace {work}: the lessons' paths lead there"
    )
    assert os.readlink(top / "workspace") == str(work)
    assert lesson_paths.link_checkout_workspace() is None  # already there: nothing to say
    (work / "kept.txt").write_text("mine\n")
    assert cleanup.clean() == 0
    assert not os.path.lexists(top / "workspace")
    assert (work / "kept.txt").read_text() == "mine\n"  # not the lab's: left alone

    (top / "workspace").mkdir()  # the learner's own folder of that name
    said = lesson_paths.link_checkout_workspace()
    assert said is not None and said.startswith(f"note: {top / 'workspace'} is not a link")
    assert lesson_paths.remove_checkout_link() is False
    assert (top / "workspace").is_dir()
    (top / "workspace").rmdir()
    (top / "workspace").symlink_to(tmp_path)  # a link elsewhere is not the lab's either
    assert lesson_paths.remove_checkout_link() is False
    assert os.readlink(top / "workspace") == str(tmp_path)


def test_make_lab_links_the_workspace_after_the_run_even_a_failed_one() -> None:
    """The link is `make lab`'s (the learner's command), not `iolab lab`'s, which tests and
    notebooks run: it comes after the run, whose exit status make keeps."""
    done = subprocess.run(
        ["make", "-n", "-s", "lab", "LESSONS=01"],
        cwd=ROOT,
        env={**os.environ, "IOLAB_CLASS": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    recipe = done.stdout[done.stdout.index("-m iolab lab --lessons 01") :]
    assert "|| status=$?" in recipe and recipe.rstrip().endswith("exit $status")
    assert "link_checkout_workspace" in recipe
    source = (ROOT / "iolab" / "cli" / "lab.py").read_text()
    assert "link_checkout_workspace" not in source
