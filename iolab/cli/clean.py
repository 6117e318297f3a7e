"""`python -m iolab clean`: remove everything the lab wrote, and nothing else (make clean)."""

from __future__ import annotations

import argparse

from iolab.core.cleanup import clean


def setup_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("clean", help="remove everything the lab wrote")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from iolab.core.workspace import WorkspaceEntry

    if (WorkspaceEntry.PFS.path() / "cluster").exists():  # its daemons and mount go first
        from iolab.storage.cephfs import down

        down()
    return clean()
