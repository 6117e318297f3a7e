"""The learner's own pages: `make lab` measures this machine, executes every notebook into the
workspace and builds the site from those copies, saying what could not run here.

notebooks.py executes the notebooks, site.py stages and builds the site, missing.py sums up
what this machine lacks, lab.py is the whole `make lab` sequence. Rank 3 (tests/test_layers.py):
it runs measure and storage; classmode is its sibling, so the class wall comes in through
run_lab's `share` from the command line.
"""
