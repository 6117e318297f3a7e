"""Class mode: one workshop of many learners on one cluster.

A week before, `iolab class preflight` (preflight.py, load.py, letter.py); the day before,
`iolab class setup DIR` (setup.py, layout.py); during, learners `source DIR/activate`, check
answers with `iolab answer NN` (exercises.py) and the instructor projects `iolab class wall`
(wall.py); after, `iolab class clean DIR` (teardown.py). What a joined learner's lab does
differently lives in iolab.core.class_folder.
"""

#: A class size class mode accepts: a workshop, not a campus (`--learners`, class_load).
MAX_LEARNERS = 500
