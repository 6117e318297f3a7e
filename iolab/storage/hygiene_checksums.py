"""Moving data with checksums: a sha256 manifest written before, checked after.

A copy can end short (full disk, killed job), or with flipped bytes (bad memory, a flaky
network link, a tool that skips verification); both look fine to `ls`. The remedy from
Bekman's "Storage" chapter: compute checksums at the source, check them at the destination.
The manifest written here is in the format of `sha256sum` ("<hex>  <path>" per line), so the
real `sha256sum -c` verifies it on any Linux machine, as Python's own check does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from iolab.core.capacity import check_capacity
from iolab.core.dataset import sha256_of
from iolab.core.errors import LabError
from iolab.core.owned import discard_owned
from iolab.core.workspace import workdir

MANIFEST_NAME = "SHA256SUMS"
SHA256SUM_TIMEOUT_S = 600


def _relative_files(root: Path) -> list[str]:
    """Regular files under `root` as sorted relative POSIX paths; the manifest itself excluded.

    sha256sum escapes names holding a newline or a backslash; rather than imitate that, such
    names are refused.
    """
    names = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if rel == MANIFEST_NAME or not Path(dirpath, name).is_file():
                continue
            if "\n" in rel or "\\" in rel:
                raise LabError(f"the file name {rel!r} holds a newline or backslash; rename it")
            names.append(rel)
    return sorted(names)


def manifest_text(root: Path | str) -> str:
    """The sha256sum-format manifest of every regular file under `root`."""
    root = Path(root)
    if not root.is_dir():
        raise LabError(f"{root} is not a directory; pass the directory to checksum")
    return "".join(f"{sha256_of(root / rel)}  {rel}\n" for rel in _relative_files(root))


def _inside_workspace(path: Path) -> Path:
    """`path` resolved, or a LabError when it is not inside the lab's workspace."""
    resolved = path.resolve()
    if workdir().resolve() not in resolved.parents:
        raise LabError(f"{path} is outside the lab's workspace {workdir()}; copy into it instead")
    return resolved


def copy_with_manifest(source: Path | str, destination: Path | str) -> Path:
    """Copy a directory into the workspace with the source's manifest; returns the manifest.

    The digests are taken from the source before copying, so they record what should arrive.
    The copy is made under a temporary name and renamed at the end, so an interrupted copy
    never looks complete; an existing destination is refused.
    """
    source = Path(source)
    destination = _inside_workspace(Path(destination))
    if destination.exists():
        raise LabError(f"{destination} already exists; remove it or choose another destination")
    text = manifest_text(source)
    sizes = [(source / line[66:]).stat().st_size for line in text.splitlines()]
    destination.parent.mkdir(parents=True, exist_ok=True)
    check_capacity(destination.parent, sum(sizes), len(sizes) + 1000)
    # A name of this run's own: a second copy running at once must not delete ours.
    partial = destination.with_name(f".{destination.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        shutil.copytree(
            source, partial, symlinks=True, ignore=shutil.ignore_patterns(MANIFEST_NAME)
        )
        (partial / MANIFEST_NAME).write_text(text)
        partial.rename(destination)
    except OSError:
        discard_owned(partial)
        if destination.exists():
            raise LabError(
                f"{destination} was made by another run meanwhile; this copy was "
                "discarded; check that one against its manifest"
            ) from None
        raise
    except BaseException:
        discard_owned(partial)
        raise
    return destination / MANIFEST_NAME


@dataclass
class ChecksumCheck:
    """The outcome of checking a tree against its manifest: by which tool, and what failed."""

    checked_by: str
    files: int
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def _manifest_lines(manifest: Path) -> list[tuple[str, str]]:
    if not manifest.is_file():
        raise LabError(f"no manifest at {manifest}; make the copy with copy_with_manifest first")
    return [(line[:64], line[66:]) for line in manifest.read_text().splitlines() if line]


def verify_in_python(manifest: Path | str) -> ChecksumCheck:
    """Check every file named in `manifest` (paths relative to its directory) with hashlib."""
    manifest = Path(manifest)
    entries = _manifest_lines(manifest)
    failed = []
    for digest, rel in entries:
        path = manifest.parent / rel
        if not path.is_file() or sha256_of(path) != digest:
            failed.append(rel)
    return ChecksumCheck("python hashlib", len(entries), failed)


def verify_with_sha256sum(manifest: Path | str) -> ChecksumCheck:
    """The same check with the real `sha256sum -c --quiet`, run in the manifest's directory.

    --quiet prints only the failures ("path: FAILED", "path: FAILED open or read").
    """
    manifest = Path(manifest)
    entries = _manifest_lines(manifest)
    if shutil.which("sha256sum") is None:
        raise LabError(
            "sha256sum is not on PATH; install GNU coreutils "
            "(on macOS `shasum -a 256 -c` checks the same manifest)"
        )
    proc = subprocess.run(
        ["sha256sum", "-c", "--quiet", manifest.name],
        cwd=manifest.parent,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=SHA256SUM_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    failed = [
        line.rpartition(": FAILED")[0] for line in proc.stdout.splitlines() if ": FAILED" in line
    ]
    if proc.returncode != 0 and not failed:
        raise LabError(f"sha256sum -c could not read {manifest} ({proc.stderr.strip()})")
    return ChecksumCheck("sha256sum -c", len(entries), failed)


def checks_frame(checks: list[ChecksumCheck]) -> pd.DataFrame:
    """One row per check: tool, files checked, files failed, verdict, first failures."""
    return pd.DataFrame(
        [
            {
                "checked_by": c.checked_by,
                "files": c.files,
                "failed_files": len(c.failed),
                "ok": c.ok,
                "first_failures": ", ".join(c.failed[:3]),
            }
            for c in checks
        ]
    )
