"""`python -m iolab ...`: the toolkit's command line."""

from iolab.core.errors import quiet_interrupts

quiet_interrupts()  # from here on Ctrl-C or SIGTERM is one sentence, while starting too

from iolab.cli import run  # noqa: E402

run()
