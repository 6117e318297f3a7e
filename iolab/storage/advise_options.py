"""The defaults and least sizes `python -m iolab advise` offers: apart from
iolab.storage.advise (which needs pandas), so that checking its options imports no heavy
package."""

from __future__ import annotations

DEFAULT_BUDGET_S = 180.0
#: The most one place holds at a time by default: small next to a login node's free space.
DEFAULT_MIB = 64
DEFAULT_FILES = 1000
MIN_FILES, MIN_MIB = 50, 4
