"""Leases on cache parts: the parts a live Run reads are not deleted under it.

Parts merged away (or left by a rebuilt file) are retired, then deleted after a grace time by
whichever Run next touches that file. A Run that never refreshes (a plain ``open_run`` beside a
followed view, in this kernel or another) would then find its files gone. So each Run writes the
list of parts its views read to a lease file in the cache root; deletion skips every part a live
lease names. A lease dies with its Run (or its process: a lease whose process is gone is ignored
and removed; one from another host is trusted for ``FOREIGN_LEASE_S``).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path

FOREIGN_LEASE_S = 24 * 3600  # a lease written on another host (a shared cache dir): its process cannot be asked
_HOST = socket.gethostname()


class Lease:
    """The parts one Run reads, kept in ``<cache root>/leases/`` while the Run lives."""

    def __init__(self, root: Path, owner: object) -> None:
        self.path = root / "leases" / f"{_HOST}-{os.getpid()}-{id(owner):x}.json"
        self._finalizer = weakref.finalize(owner, _remove, self.path)

    def hold(self, parts: Iterable[str]) -> None:
        """Name the parts read now, by their paths (replacing those named before). Best effort: a read-only
        cache deletes nothing anyway."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"host": _HOST, "pid": os.getpid(), "parts": sorted({key(p) for p in parts})}, f)
            os.replace(tmp, self.path)
        except OSError:
            pass

    def release(self) -> None:
        self._finalizer()


def key(part_path: str | os.PathLike) -> str:
    """A part as leases name it: its file's folder and name (however the cache root was spelled)."""
    p = Path(part_path)
    return f"{p.parent.name}/{p.stem}"


def in_use(root: Path) -> set[str]:
    """Every part a live lease in ``root`` names (``key``)."""
    out: set[str] = set()
    folder = root / "leases"
    try:
        files = list(folder.glob("*.json"))
    except OSError:
        return out
    for f in files:
        try:
            lease = json.loads(f.read_text())
            alive = _alive(lease, f.stat().st_mtime)
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        if alive:
            parts = lease.get("parts")
            if isinstance(parts, list):  # a damaged lease names nothing (and breaks nothing)
                out.update(p for p in parts if isinstance(p, str))
        else:
            _remove(f)
    return out


def folders_in_use(root: Path) -> set[str]:
    """The names of the cache folders (``<root>/files/<name>``) holding a part a live lease names."""
    return {k.split("/", 1)[0] for k in in_use(root)}


def _alive(lease: dict, mtime: float) -> bool:
    if lease.get("host") != _HOST:
        return time.time() - mtime < FOREIGN_LEASE_S
    try:
        os.kill(int(lease["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _remove(path: Path) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
