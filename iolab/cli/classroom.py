"""`python -m iolab class ACTION`: a workshop on one cluster (iolab.classmode).

preflight (a week before: a letter for the centre's admins and a site profile), setup DIR
(the day before: one shared, read-only install), rehearse DIR (then: K simulated learners take
the documented path, without root), clean DIR (after: remove it), wall (during:
the class's results on one page), joined (what the class's `activate` prints: where a
learner's things are), and load-test (maintainers, as root in a VM of their own: N real
users join one class at once).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
import time
from pathlib import Path

from iolab.classmode import MAX_LEARNERS
from iolab.classmode.layout import DEFAULT_SLOTS, MAX_SLOTS
from iolab.classmode.reservation import TRACK_LESSONS
from iolab.core.class_folder import ClassFolder
from iolab.core.class_queue import BOUND_KEYS, SILENT_S, TURN_S
from iolab.core.options import Bounds, float_option, int_option, path_option

#: Heavy steps at a time: each run gets that share of one login node's budget.
SLOTS = Bounds(1, MAX_SLOTS, "heavy steps at a time", "the budget of one run is shared by them")
LEARNERS = Bounds(1, MAX_LEARNERS, "learners", "a workshop's size, not a campus's")
#: The benchmark's users are real accounts on this machine: a class, kept small.
BENCH_LEARNERS = Bounds(1, 60, "learners", "each is a real user account made for the run")
#: How many entries `class clean` names of what it could not remove.
SHOWN_LEFT = 5
#: The heavy-step queue's bounds an instructor may set (iolab.core.class_queue).
QUEUE_SILENT = Bounds(
    *BOUND_KEYS["queue_silent_s"],
    "s",
    "the heartbeat is touched every quarter of it, and a busy node may delay one",
)
QUEUE_TURN = Bounds(*BOUND_KEYS["queue_turn_s"], "s", "one step's turn, at most a day")
#: How often `class wall --watch` rebuilds the page: each build reads every learner's file.
WATCH = Bounds(10, 3600, "s", "each rebuild reads every learner's file on the wall")


def add_learners_option(parser: argparse.ArgumentParser) -> None:
    """`--learners N`, required: the class size the preflight and the setup plan for."""
    parser.add_argument(
        "--learners",
        type=int_option("--learners", LEARNERS),
        required=True,
        help="how many learners will take part",
    )


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "class",
        help="instructors: check a cluster for a workshop and write the admins a letter",
        description="Tools for running the lab with a whole class on one cluster.",
    )
    parser.set_defaults(func=main)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    preflight = actions.add_parser(
        "preflight",
        help="a week before: ptrace, FUSE, Slurm and reservations, room for N learners, "
        "Python, the class folder; writes letter.md and site-profile.json",
        description="Check this cluster for a workshop of N learners, a week before. Nothing "
        "is submitted or installed; two reports are written.",
    )
    add_learners_option(preflight)
    preflight.add_argument(
        "--class-dir",
        type=path_option("--class-dir"),
        default=None,
        help="the folder the class will share (checked, never changed)",
    )
    preflight.add_argument(
        "--track",
        choices=tuple(TRACK_LESSONS),
        default="course",
        help="the track you teach (workshop/instructor-guide.md), which sizes the reservation: "
        "only the tracks with lesson 08 (course, parallel-io) submit batch jobs "
        "(default: course, every lesson)",
    )
    preflight.add_argument(
        "--out",
        type=path_option("--out"),
        default=None,
        help="where to write letter.md and site-profile.json "
        "(default: <workspace>/lab/class-preflight)",
    )
    preflight.set_defaults(func=main)

    setup = actions.add_parser(
        "setup",
        help="the day before: one shared, read-only install of the lab in DIR",
        description="Build the class in DIR: a copy of this lab, its environment, the "
        "datasets (verified), a Jupyter kernel spec and `activate`. Learners join "
        "with `source DIR/activate`. pip needs the package index once (or "
        "PIP_FIND_LINKS/PIP_NO_INDEX for a wheel folder).",
    )
    setup.add_argument(
        "directory",
        type=path_option("DIR"),
        metavar="DIR",
        help="a new or empty folder the class's group can reach",
    )
    add_learners_option(setup)
    setup.add_argument(
        "--slots",
        type=int_option("--slots", SLOTS),
        default=DEFAULT_SLOTS,
        help="heavy steps (fio, mdrates, sweeps, checkpoints) running at once; "
        f"each gets that share of the login-node budget (default: "
        f"{DEFAULT_SLOTS})",
    )
    setup.add_argument(
        "--group", default=None, help="the class's Unix group (default: your primary group)"
    )
    setup.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter the environment is built from; learners must be "
        "able to run it (default: this one)",
    )
    setup.add_argument(
        "--reservation",
        default=None,
        help="a Slurm reservation learners' jobs go to (SBATCH_RESERVATION)",
    )
    setup.add_argument(
        "--account", default=None, help="the Slurm account learners' jobs use (SBATCH_ACCOUNT)"
    )
    setup.add_argument(
        "--queue-silent-s",
        type=float_option("--queue-silent-s", QUEUE_SILENT),
        default=SILENT_S,
        metavar="SECONDS",
        help="a waiting learner's step whose heartbeat is this old is taken for stopped "
        f"(Ctrl-Z, a hung node) and passed (default: {SILENT_S:g})",
    )
    setup.add_argument(
        "--queue-turn-s",
        type=float_option("--queue-turn-s", QUEUE_TURN),
        default=TURN_S,
        metavar="SECONDS",
        help="a heavy step holding its turn this long no longer holds the others back "
        f"(default: {TURN_S:g}, longer than the login-node budget's fio or sweep)",
    )
    setup.set_defaults(func=main)

    clean = actions.add_parser(
        "clean",
        help="after: remove the class's install from DIR, with what was freed",
        description="Remove what `class setup` made in DIR (only a class you set up).",
    )
    clean.add_argument("directory", type=path_option("DIR"), metavar="DIR", help="the class folder")
    clean.set_defaults(func=main)

    reset = actions.add_parser(
        "reset",
        help="during: remove one learner's results and queue tickets, so they start afresh",
        description="Remove what learner USER has in DIR's wall/ and queue/ (their results "
        "file, a ticket left by a stuck step, anything else of theirs), without following "
        "links; the class and the other learners are untouched. Their private workspace is "
        "theirs: `python -m iolab clean`, run by them, empties it.",
    )
    reset.add_argument("directory", type=path_option("DIR"), metavar="DIR", help="the class folder")
    reset.add_argument("user", metavar="USER", help="the learner's login name")
    reset.set_defaults(func=main)

    wall = actions.add_parser(
        "wall",
        help="during: the class's results on one page (instructor), or where yours "
        "sit (learner, --me)",
        description="Build the class wall from every learner's results file: the spread of "
        "the reader times, the outliers, and who has checked which exercise. The "
        "instructor's page goes to DIR/wall.html (readable by the class); a "
        "learner's to their own workspace. It also prints who holds a turn of the "
        "heavy steps (fio, metadata rates, sweeps, checkpoints) now and who waits.",
    )
    wall.add_argument(
        "--out",
        type=path_option("--out"),
        default=None,
        help="the page to write (default: the class folder's wall.html for its "
        "instructor, <workspace>/lab/class-wall.html for a learner)",
    )
    wall.add_argument(
        "--me", action="store_true", help="also print where your numbers sit in the class"
    )
    wall.add_argument(
        "--names",
        action="store_true",
        help="put each learner's login name beside their dots (default: anonymous dots; the "
        "outliers and the exercises table name learners either way)",
    )
    wall.add_argument(
        "--watch",
        type=int_option("--watch", WATCH),
        metavar="SECONDS",
        help="rebuild the page every SECONDS until Ctrl-C (the page then reloads itself as "
        "often): the projector follows the class",
    )
    wall.set_defaults(func=main)

    load_test = actions.add_parser(
        "load-test",
        help="maintainers, as root in a VM: N real users join one class at once",
        description="Create N users, set up a real class, and measure each learner's time to "
        "a first result, the queue's waits, what the shared place gained, privacy "
        "and teardown; everything made is removed. Needs root: never on a cluster.",
    )
    load_test.add_argument(
        "--learners",
        type=int_option("--learners", BENCH_LEARNERS),
        default=30,
        help="how many learners join at once (default: 30)",
    )
    load_test.add_argument(
        "--lessons",
        default=None,
        metavar="NN,NN",
        help="instead of the benchmark's single reader and heavy step, each learner joins "
        "with `. DIR/activate` and runs `python -m iolab lab --lessons NN,NN`: the documented "
        "path, measured as `class rehearse` measures it, with real accounts",
    )
    load_test.add_argument(
        "--out",
        type=path_option("--out"),
        default=None,
        help="the JSON to write (default: <workspace>/lab/class-load-test.json, or "
        "class-load-test-lessons.json with --lessons: the two hold different figures)",
    )
    load_test.set_defaults(func=main)

    rehearse = actions.add_parser(
        "rehearse",
        help="before the class, without root: K simulated learners take the documented path",
        description="K processes of yours, each with a private workspace, join the class in "
        "DIR at once and run `python -m iolab lab --lessons ...` as learners will; prints each "
        "one's time to a first result and to the end, the queue's waits, and the most "
        "processes, threads, files and bytes they held. They share your user id, so the queue "
        "gives them one place: their heavy steps take turns one at a time (an upper bound). "
        "It runs K labs at once on this node: rehearse when the node is quiet.",
    )
    rehearse.add_argument(
        "directory", type=path_option("DIR"), metavar="DIR", help="the class folder"
    )
    rehearse.add_argument(
        "--learners",
        type=int_option("--learners", LEARNERS),
        default=3,
        help="how many simulated learners start at once (default: 3)",
    )
    rehearse.add_argument(
        "--lessons",
        default="01,02",
        metavar="NN,NN",
        help="the lessons they run, as the morning's `iolab lab --lessons` (default: 01,02)",
    )
    rehearse.add_argument(
        "--out",
        type=path_option("--out"),
        default=None,
        help="the JSON to write (default: <workspace>/lab/class-rehearsal.json)",
    )
    rehearse.set_defaults(func=main)

    joined = actions.add_parser(
        "joined",
        help="learners: the class you joined, your workspace, the queue",
        description="Say which class IOLAB_CLASS joins, where your private workspace is, and "
        "how heavy steps take turns; lay the workspace out like a checkout (links to the "
        "class's demos and datasets), so the lessons' commands run there as printed.",
    )
    joined.add_argument(
        "--enter",
        action="store_true",
        help="print only the workspace's path on standard output (the rest on standard "
        "error), for `cd` (the class's activate uses it)",
    )
    joined.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """The action named."""
    return {
        "preflight": preflight_main,
        "setup": setup_main,
        "clean": clean_main,
        "reset": reset_main,
        "wall": wall_main,
        "load-test": load_test_main,
        "rehearse": rehearse_main,
        "joined": joined_main,
    }[args.action](args)


def load_test_main(args: argparse.Namespace) -> int:
    """Run the class benchmark (N real users at once) and save its figures; with --lessons,
    the rehearsal of the documented path with N real accounts."""
    from iolab.classmode.bench import run_class_bench
    from iolab.core.atomic import atomic_output
    from iolab.core.errors import LabError
    from iolab.core.lab_dirs import results_dir

    if args.lessons is not None:
        from iolab.classmode.rehearsal import rehearse_with_accounts
        from iolab.cli.lab import lessons_option  # pandas and the pages: not at start-up

        lessons = ",".join(sorted(lessons_option(args.lessons)))  # before anything is made
        figures = rehearse_with_accounts(args.learners, lessons)
        return _rehearsed(figures, args.out or results_dir() / "class-load-test-lessons.json")
    out = args.out or results_dir() / "class-load-test.json"
    if args.learners < 2:
        raise LabError(
            "--learners 1 leaves the benchmark nobody to compare the lone learner with: give "
            "2 or more, or add --lessons NN to follow one account through the lessons"
        )
    figures = run_class_bench(args.learners)
    with atomic_output(out) as partial:
        partial.write_text(json.dumps(figures, indent=1) + "\n")
    shown = {key: value for key, value in figures.items() if key != "wall"}
    width = max(map(len, shown))
    for key, value in shown.items():
        print(f"{key:<{width}}  {value}")
    print(f"\nsaved: {out}")
    return 0


def rehearse_main(args: argparse.Namespace) -> int:
    """Run the rehearsal, print each learner's row and the class's figures, save them all."""
    from iolab.classmode.rehearsal import rehearse
    from iolab.cli.lab import lessons_option  # pandas and the pages: not at start-up
    from iolab.core.lab_dirs import results_dir

    lessons = ",".join(sorted(lessons_option(args.lessons)))  # before anyone starts
    figures = rehearse(args.directory, args.learners, lessons)
    return _rehearsed(figures, args.out or results_dir() / "class-rehearsal.json")


def _rehearsed(figures: dict, out: Path) -> int:
    """Save a rehearsal's figures to `out`, print each learner's row, the class's figures and
    the last lines of each failed run; 0 if every learner finished."""
    from iolab.classmode.rehearsal import rehearsal_frame
    from iolab.core.atomic import atomic_output
    from iolab.core.tables import to_markdown
    from iolab.core.wording import counted

    with atomic_output(out) as partial:
        partial.write_text(json.dumps(figures, indent=1) + "\n")
    print()
    print(to_markdown(rehearsal_frame(figures)))
    print(
        f"\n{counted(figures['learners'], 'learner')}, lessons {figures['lessons']}, on "
        f"{figures['machine']}: first result after {figures['first_result_median_s']} s "
        f"(median; the last after {figures['first_result_max_s']} s), all done after "
        f"{figures['done_max_s']} s; at most {figures['processes_peak_all']} processes and "
        f"{figures['threads_peak_all']} threads at once. Their CPU time, {figures['cpu_s']} s, "
        f"spread over {figures['cores']} cores, is a floor of {figures['cpu_floor_s']} s for "
        "the last learner to finish, however they are scheduled."
    )
    for each in figures["per_learner"]:
        if each["exit"]:
            print(f"\n{each['learner']} ended with exit status {each['exit']}; its last lines:")
            print("\n".join(f"  | {line}" for line in each["last_lines"]))
    print(f"saved: {out}")
    return 0 if figures["all_finished"] else 1


def wall_main(args: argparse.Namespace) -> int:
    """Build the wall page (again every --watch seconds); with --me, say where this
    learner's numbers sit."""
    from iolab.classmode.wall import figures_frame, learner_name, scan_wall, where_i_sit
    from iolab.core.class_folder import CLASS_ENV, active_class
    from iolab.core.errors import LabError

    joined = active_class()
    if joined is None:
        raise LabError(f"no class joined: `source DIR/activate` (or set {CLASS_ENV}=DIR) first")
    _build_wall(joined, args.out, args.watch, args.names)
    if args.me:
        lines = where_i_sit(figures_frame(scan_wall(joined).records), learner_name(os.getuid()))
        print(
            "\n".join(lines)
            if lines
            else "no results of yours on the wall yet: `make lab` puts them there"
        )
    if args.watch is None:
        return 0
    print(f"rebuilding every {args.watch} s; Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(args.watch)
            _build_wall(joined, args.out, args.watch, args.names)
    except KeyboardInterrupt:  # the way a watch ends: the page stays as last built
        print("stopped watching; the page stays as last built")
    return 0


def _build_wall(
    joined: ClassFolder, out: Path | None, refresh_s: int | None, named: bool = False
) -> None:
    """Write the wall page once and print one line about it and one about the queue."""
    from iolab.classmode.exercises import EXERCISES
    from iolab.classmode.wall import not_on_the_wall, scan_wall, wall_page
    from iolab.core.atomic import atomic_output
    from iolab.core.class_queue import queue_summary
    from iolab.core.lab_dirs import results_dir

    wall = scan_wall(joined)
    keys = [f"{exercise.lesson}-{exercise.key}" for exercise in EXERCISES]
    instructor = os.stat(joined.root).st_uid == os.getuid()
    page = out or (joined.root / "wall.html" if instructor else results_dir() / "class-wall.html")
    queue = queue_summary(joined.queue, joined.slots) if joined.queue.is_dir() else ""
    with atomic_output(page) as partial:
        partial.write_text(
            wall_page(
                joined,
                wall.records,
                keys,
                wall.ignored_text(),
                queue,
                refresh_s,
                absent=not_on_the_wall(joined, wall.records) if instructor else None,
                named=named,
            )
        )
    if instructor and out is None:
        os.chmod(page, 0o640)  # the class reads it; only the instructor writes it
    ignored = f"; {wall.ignored_text()}" if wall.ignored else ""
    when = time.strftime("%H:%M:%S")
    print(
        f"{when} class wall: {len(wall.records)} of {joined.learners} learners{ignored} -> {page}"
    )
    if queue:
        print(queue, flush=True)


def setup_main(args: argparse.Namespace) -> int:
    """Build the class and print what it holds and how learners join."""
    from iolab.classmode.setup import setup_class

    report = setup_class(
        args.directory,
        args.learners,
        slots=args.slots,
        group=args.group,
        python=args.python,
        reservation=args.reservation,
        account=args.account,
        queue_bounds=(args.queue_silent_s, args.queue_turn_s),
    )
    described = report.description
    print(
        f"\nclass {described['name']}: {report.files:,} files, {report.bytes / 1e6:,.0f} MB "
        f"in {report.root}, for {described['learners']} learners, "
        f"{described['slots']} heavy steps at a time"
    )
    print(f"learners' workspaces: in {described['workspaces_in']} (private, 0700)")
    for folder in described["learners_cannot_enter"]:
        print(
            f"warning: learners cannot enter {folder}: make the class folder and the "
            "interpreter reachable (chmod o+x, or --python a shared one)"
        )
    print(f"learners join with:  source {report.root}/activate")
    print(
        f"Jupyter: JUPYTER_PATH={report.root}/share/jupyter offers the kernel "
        f"'Storage I/O lab (class {described['name']})'"
    )
    return 0


def clean_main(args: argparse.Namespace) -> int:
    """Remove the class and report what was freed, what learners had left in it, and (one
    sentence, exit 2) what could not be removed."""
    from iolab.classmode.teardown import clean_class
    from iolab.core.errors import LabError

    freed = clean_class(args.directory)
    where = "the folder is gone" if freed.folder_removed else "the folder itself stays"
    print(
        f"removed the class in {args.directory}: {freed.files:,} files and "
        f"{freed.bytes / 1e6:,.0f} MB freed; {where}."
    )
    if freed.leftovers:
        print(
            f"what learners had left, removed without following a link: "
            f"{', '.join(freed.leftovers)}"
        )
    if freed.left:
        shown = "; ".join(freed.left[:SHOWN_LEFT])
        more = f" and {len(freed.left) - SHOWN_LEFT} more" if len(freed.left) > SHOWN_LEFT else ""
        raise LabError(
            f"could not remove {shown}{more}; the class marker stays, so "
            f"`python -m iolab class clean {args.directory}` finishes the job once "
            "that is fixed"
        )
    print("Each learner removes their own workspace with `python -m iolab clean`.")
    return 0


def reset_main(args: argparse.Namespace) -> int:
    """Remove one learner's entries from the class and say which (one sentence, exit 2, for
    what could not go)."""
    from iolab.classmode.teardown import reset_learner
    from iolab.core.errors import LabError

    done = reset_learner(args.directory, args.user)
    if done.removed:
        print(f"removed of {args.user}, without following a link: {', '.join(done.removed)}")
    else:
        print(f"{args.user} has nothing in the class's wall or queue")
    if done.left:
        raise LabError(f"could not remove {'; '.join(done.left[:SHOWN_LEFT])}")
    return 0


def joined_main(args: argparse.Namespace) -> int:
    """What a learner who just joined needs to know, in four lines; the workspace laid out
    like a checkout (iolab.core.lesson_paths)."""
    from iolab.core.class_folder import CLASS_ENV, active_class
    from iolab.core.lab_dirs import ensure_writable_dir
    from iolab.core.lesson_paths import lay_out
    from iolab.core.workspace import WorkspaceEntry, workdir

    out = sys.stderr if args.enter else sys.stdout
    joined = active_class()
    if joined is None:
        print(
            f"you are not in a class ({CLASS_ENV} is not set): the lab works on its own", file=out
        )
        return 0
    workspace = workdir()
    ensure_writable_dir(WorkspaceEntry.TMP.path())  # the lessons' workspace/tmp, the lab's
    taken = lay_out(workspace, joined)
    print(
        f"joined class {joined.name}: shared environment and datasets in {joined.root} (read-only)",
        file=out,
    )
    print(f"your workspace: {workspace} (private to you)", file=out)
    print(
        "the lessons' commands run as printed from your workspace: its demos, dataset and "
        "images lead to the class's copies, and workspace/ to the folder itself",
        file=out,
    )
    if taken:
        print(
            f"note: {', '.join(taken)} in your workspace is something else than the lab's link, "
            "so it was left as it is: rename it to let the lessons' commands work there",
            file=out,
        )
    print(
        f"heavy steps take turns, {joined.slots} at a time; run the lab with "
        "`python -m iolab lab`, or open the notebooks with `python -m iolab jupyter`",
        file=out,
    )
    if args.enter:
        print(workspace)
    return 0


def preflight_main(args: argparse.Namespace) -> int:
    """The preflight and its two reports."""
    from iolab.classmode.letter import letter
    from iolab.classmode.load import class_load
    from iolab.classmode.preflight import preflight
    from iolab.core.atomic import atomic_output
    from iolab.core.lab_dirs import ensure_writable_dir, results_dir

    load = class_load(args.learners)
    out = (  # before the checks: a wrong --out is told at once, not after them
        ensure_writable_dir(args.out, option="--out")
        if args.out
        else ensure_writable_dir(results_dir() / "class-preflight")
    )
    report = preflight(load, args.class_dir)
    host = socket.gethostname()
    text = letter(report, load, getpass.getuser(), host, time.strftime("%Y-%m-%d"), args.track)
    with atomic_output(out / "letter.md") as partial:
        partial.write_text(text)
    with atomic_output(out / "site-profile.json") as partial:
        partial.write_text(json.dumps({"host": host, **report}, indent=1) + "\n")
    width = max(len(check["name"]) for check in report["checks"])
    for check in report["checks"]:
        todo = f" -> {check['todo']}" if check["todo"] else ""
        print(f"{check['name']:<{width}}  {check['state']:<4}  {check['found']}{todo}")
    print(
        f"\nletter for the admins: {out / 'letter.md'}\nsite profile: {out / 'site-profile.json'}"
    )
    return 0
