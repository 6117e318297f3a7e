"""Count the files a Python program opens, from inside it, for machines without strace.

Usage: python iolab/measure/audit_open.py --data DIR --out COUNTS.json [--bookkeeping N1,N2]
       -- (SCRIPT | -c CODE | -m MODULE) [ARGS...]
(`--data-dir DIR`, the option's old name, is accepted as well.)

The program runs as __main__ with its own sys.argv, as if started directly. A
`sys.addaudithook` hook sees every `open` event (builtin open, os.open, the import system
reading modules) and every `os.listdir`/`os.scandir`, and counts them as opens of the
dataset's files, listings of its directories, or opens of anything else (the dataset's
own bookkeeping files, named relative to DIR by --bookkeeping, count as else). At exit the counts
are written to COUNTS.json. An open of a path that does not exist (and is not being
created) is not counted, as it will fail; the hook starts after the interpreter has started
up, so start-up imports are not seen.

Only the standard library is used, and the file is run by path (not with -m), so it works
in any working directory and environment the measured program needs.
"""

from __future__ import annotations

import os
import runpy  # imported before the hook is installed, so the wrapper's own imports are not counted
import sys
import types

O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_CREAT = os.O_CREAT


class OpenCounter:
    """Audit hook state: counts opens of the dataset's files apart from all other opens."""

    def __init__(self, dataset_dir: str, bookkeeping: tuple[str, ...] = ()) -> None:
        spelled = os.path.normpath(os.path.abspath(dataset_dir))
        self.roots = tuple(dict.fromkeys((spelled, os.path.realpath(dataset_dir))))
        self.bookkeeping = bookkeeping
        self.active = True
        self.counts = {"dataset_opens": 0, "dataset_dir_opens": 0, "other_opens": 0}
        self.per_path: dict[str, int] = {}

    def hook(self, event: str, args: tuple) -> None:
        """Called by the interpreter for every audit event; must not open files itself."""
        if not self.active:
            return
        if event == "open":
            self._opened(args[0], args[2] or 0)
        elif event in ("os.listdir", "os.scandir"):
            self._listed(args[0])

    def _opened(self, path: object, flags: int) -> None:
        if isinstance(path, int) or not (flags & O_CREAT or self._exists(path)):
            return  # an already open descriptor, or an open that will fail: not an open
        relative = self._relative(path)
        if relative is None or relative in self.bookkeeping:
            self.counts["other_opens"] += 1
        elif flags & O_DIRECTORY:
            self.counts["dataset_dir_opens"] += 1
        else:
            self.counts["dataset_opens"] += 1
            self.per_path[relative] = self.per_path.get(relative, 0) + 1

    def _listed(self, path: object) -> None:
        if self._relative("." if path is None else path) is not None:
            self.counts["dataset_dir_opens"] += 1

    @staticmethod
    def _exists(path: object) -> bool:
        """Whether an open can succeed; os.stat raises no audit event, so this is not counted."""
        if not isinstance(path, (str, bytes, int, os.PathLike)):
            return False  # not a path
        try:
            return os.path.exists(path)
        except (TypeError, ValueError):
            return False

    def _relative(self, path: object) -> str | None:
        """path relative to the data directory, or None (also for descriptors, which have no
        name)."""
        if not isinstance(path, (str, bytes, os.PathLike)):
            return None  # a descriptor, or not a path at all
        try:
            absolute = os.path.abspath(os.fsdecode(os.fspath(path)))
        except (TypeError, ValueError):  # not a path: never let the hook break the program
            return None
        for root in self.roots:
            if absolute == root:
                return "."
            prefix = root.rstrip("/") + "/"
            if absolute.startswith(prefix):
                return absolute[len(prefix) :]
        return None

    def write(self, out: str) -> None:
        self.active = False
        import json  # only now: with the hook off, this import is not counted

        with open(out, "w", encoding="utf-8") as fh:
            json.dump(
                {**self.counts, "dataset_open_counts": dict(sorted(self.per_path.items()))}, fh
            )


def run_program(program: list[str]) -> None:
    """Run a script, `-c CODE` or `-m MODULE` as __main__, with sys.argv and sys.path as python
    sets them."""
    # sys.path[0] is this file's directory: put the program's in its place (unless -P, 3.11+).
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = (
            ""
            if program[0] == "-c"
            else os.getcwd()
            if program[0] == "-m"
            else os.path.dirname(os.path.abspath(program[0]))
        )
    if program[0] == "-c":
        sys.argv = ["-c", *program[2:]]
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__  # main.__builtins__, undeclared in typeshed
        sys.modules["__main__"] = main
        exec(compile(program[1], "<string>", "exec"), main.__dict__)
    elif program[0] == "-m":
        sys.argv = [program[1], *program[2:]]
        runpy.run_module(program[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(program)
        runpy.run_path(program[0], run_name="__main__")


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _parse(argv: list[str]) -> tuple[str, str, tuple[str, ...], list[str]]:
    """Parse `--data D --out F [--bookkeeping N,..] -- PROGRAM...` without argparse, whose
    imports would be cached."""
    usage = (
        "usage: audit_open.py --data DIR --out COUNTS.json "
        "[--bookkeeping N1,N2] -- PROGRAM [ARGS...]"
    )
    if "--" not in argv or argv.index("--") % 2:  # every option before -- takes a value
        raise SystemExit(usage)
    split = argv.index("--")
    options = dict(zip(argv[:split:2], argv[1:split:2], strict=True))
    dataset_dir = options.get("--data", options.get("--data-dir"))
    if dataset_dir is None or "--out" not in options:
        raise SystemExit(usage)
    bookkeeping = tuple(name for name in options.get("--bookkeeping", "").split(",") if name)
    return dataset_dir, options["--out"], bookkeeping, argv[split + 1 :]


def main(argv: list[str] | None = None) -> int:
    dataset_dir, out, bookkeeping, program = _parse(sys.argv[1:] if argv is None else argv)
    counter = OpenCounter(dataset_dir, bookkeeping)
    sys.addaudithook(counter.hook)
    code = 0
    try:
        run_program(program)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        counter.active = False
        sys.excepthook(*sys.exc_info())
        code = 1
    finally:
        counter.write(out)
    return code


if __name__ == "__main__":
    sys.exit(main())
