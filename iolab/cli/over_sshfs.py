"""`python -m iolab over-sshfs --data DIR -- CMD ... {} ...`: run a command on DIR mounted
over sshfs through a private sshd on 127.0.0.1 (iolab.storage.netmount).

`--data` (the old name `--export` still works) is the data the command reads through the
mount, named as in every other command.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from iolab.cli.options import add_command_argument, add_data_option
from iolab.core.errors import LabError
from iolab.storage.netmount import LOOPBACK, loopback_sshfs


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "over-sshfs",
        help="run a command on a directory mounted over sshfs, a real network file system",
        description=(
            "Mount DIR over sshfs through a private sshd on 127.0.0.1 (no root needed), run "
            "the command with every {} in its arguments replaced by the mount point, then "
            "unmount and stop sshd. Exits with the command's exit code."
        ),
    )
    add_data_option(
        parser,
        "the directory to mount, e.g. workspace/dataset",
        required=True,
        old_names=("--export",),
    )
    add_command_argument(parser, "the command to run, after --; {} stands for the mount point")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Mount, run the command, unmount; the command's exit code (128+N for signal N)."""
    if not args.command:
        raise LabError(
            "no command was given; put it after `--`, e.g. `python -m iolab "
            "over-sshfs --data DIR -- python demos/read_files.py --data {}`"
        )
    with loopback_sshfs(args.dataset_dir) as mount:
        print(
            f"{mount.export_dir} is mounted over sshfs at {mount.mount_point} "
            f"(sshd on {LOOPBACK}:{mount.port})",
            file=sys.stderr,
        )
        try:
            code = subprocess.run(
                [part.replace("{}", str(mount.mount_point)) for part in args.command]
            ).returncode
        except FileNotFoundError:
            raise LabError(
                f"the command {args.command[0]!r} was not found; check its spelling, "
                "install it, or give its full path"
            ) from None
    return code if code >= 0 else 128 - code
