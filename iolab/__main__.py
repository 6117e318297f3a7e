"""`python -m iolab ...`: the toolkit's command line."""

from iolab.cli import run

run()
