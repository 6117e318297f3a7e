"""Class mode: one workshop of many learners on one cluster (issue 22). So far the
instructor's preflight, `iolab class check` (preflight.py, load.py, letter.py)."""

#: A class size class mode accepts: a workshop, not a campus (`--learners`, class_load).
MAX_LEARNERS = 500
