"""A traced command that outlives its limit is stopped with its tracer, in one sentence
(iolab.measure.strace_run.run_strace's timeout, which lesson 12's CephFS profile uses)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from processes import processes_naming

from iolab.core.errors import LabError
from iolab.diagnosis.trace import profile_command


@pytest.mark.needs("strace")
def test_a_traced_command_past_its_limit_is_stopped_with_its_tracer(tmp_path: Path) -> None:
    marker = str(tmp_path / "still-here")  # names the sleeping child, and only it
    began = time.monotonic()
    with pytest.raises(LabError, match=r"still running under strace after 2 s .*: the server"):
        profile_command(
            [sys.executable, "-c", "import time; time.sleep(60)", marker],
            cwd=tmp_path,
            method="strace",
            timeout=2,
            late="the server stopped answering",
        )
    assert time.monotonic() - began < 20
    deadline = time.monotonic() + 10
    while processes_naming(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_naming(marker) == []
