"""Where the bytes live: the places a user can write, and how each behaves.

Owns: the locations the lab discovers (home, scratch, /dev/shm, ...), the network mount
(sshfs), fio and its JSON parser, the file-size sweep, metadata rates, perception tests,
large files, comparisons across places, and storage hygiene. Imports iolab.core and
iolab.measure.
"""
