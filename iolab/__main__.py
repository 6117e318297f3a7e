"""`python -m iolab ...`: the toolkit's command line."""

from iolab.cli import main
from iolab.errors import run_cli

run_cli(main)
