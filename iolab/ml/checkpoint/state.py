"""The model state a simulated training run saves: exact in size, incompressible, reproducible.

Uniform random float32 values do not compress, so no file system can store them for free,
and the same seed gives byte-identical arrays (and so the same sha256) on every machine.
"""

from __future__ import annotations

import numpy as np

from iolab.core.errors import LabError
from iolab.ml.checkpoint_options import DEFAULT_MIB

MIB = 1024**2
DEFAULT_LAYERS = 8


def model_state(
    size_mib: int = DEFAULT_MIB, layers: int = DEFAULT_LAYERS, seed: int = 0
) -> dict[str, np.ndarray]:
    """A stand-in for a state_dict: `layers` float32 arrays of exactly size_mib MiB in total."""
    values = size_mib * MIB // 4
    if not 1 <= layers <= values:
        raise LabError(
            f"{layers} layers do not fit in {size_mib} MiB of float32; choose "
            f"between 1 and {values} layers"
        )
    rng = np.random.default_rng(seed)
    sizes = [values // layers] * (layers - 1)
    sizes.append(values - sum(sizes))
    return {f"layer{i:02d}.weight": rng.random(n, dtype=np.float32) for i, n in enumerate(sizes)}


def state_bytes(state: dict[str, np.ndarray]) -> int:
    """Bytes of data in the state (the file adds a small header per array)."""
    return sum(array.nbytes for array in state.values())
