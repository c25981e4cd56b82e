"""A series: `pin.toml` (the exact upstream text) + quilt-style `series` + git-style patches
(the runtime patch rendered where the folder holds its marker: patchkit/engine/runtime_patch.py)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from patchkit.engine.diffparse import Patch, parse_patch
from patchkit.engine.runtime_patch import patch_data
from patchkit.errors import InvalidInput
from patchkit.paths import path_problem
from patchkit.pin import Pin, PinnedFile, parse_pin  # noqa: F401  (the series' pin; re-exported)


@dataclass
class Series:
    directory: str
    name: str
    pin: Pin
    patches: list[Patch]
    digest: str

    @property
    def file_diffs(self):
        for patch in self.patches:
            yield from patch.files


def read_series_file(path: str) -> list[str]:
    names = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            name = line.split()[0]  # quilt allows options (-p1) after the name; only -p1 is meaningful
            opts = line.split()[1:]
            if opts and opts != ["-p1"]:
                raise InvalidInput(f"{path}:{lineno}: unsupported patch options {opts} (git-style -p1 only)")
            if path_problem(name) or ("/" in name and name.startswith(".")):
                raise InvalidInput(f"{path}:{lineno}: bad patch name {name!r}")
            names.append(name)
    return names


@dataclass
class SeriesFiles:
    """The bytes of a series folder and its digest, read and checked but not parsed."""

    directory: str
    pin_path: str
    series_path: str
    pin_bytes: bytes
    patches: list[tuple[str, bytes]]
    digest: str

    @property
    def name(self) -> str:
        return os.path.basename(self.directory)


def read_series(directory: str) -> SeriesFiles:
    """Read pin.toml, series and every listed patch; the digest covers them all.

    A listed patch is its file, or, where the folder holds ``<patch>.runtime`` instead, the
    runtime patch rendered from patchkit/timing/phase_timer.py (``runtime_patch``): the same
    bytes, and so the same digest, as the file the wheel and ``patch.export`` write."""
    directory = os.path.abspath(directory)
    if not os.path.isdir(directory):
        raise InvalidInput(f"series {directory}: no such directory")
    pin_path = os.path.join(directory, "pin.toml")
    series_path = os.path.join(directory, "series")
    for p in (pin_path, series_path):
        if not os.path.isfile(p):
            raise InvalidInput(f"series {directory}: missing {os.path.basename(p)}")
    digest = hashlib.sha256()
    with open(pin_path, "rb") as fh:
        pin_bytes = fh.read()
    digest.update(pin_bytes)
    names = read_series_file(series_path)
    if not names:
        raise InvalidInput(f"{series_path}: lists no patches")
    if len(set(names)) != len(names):
        raise InvalidInput(f"{series_path}: a patch is listed twice")
    patches = []
    for name in names:
        data = patch_data(directory, name, pin_bytes)  # the file, or the runtime patch rendered
        digest.update(name.encode() + b"\0" + data)
        patches.append((name, data))
    return SeriesFiles(directory, pin_path, series_path, pin_bytes, patches, digest.hexdigest())


def load_series(directory: str | SeriesFiles) -> Series:
    """Load and validate a series folder; raises InvalidInput before any target is touched."""
    files = directory if isinstance(directory, SeriesFiles) else read_series(directory)
    pin = parse_pin(files.pin_bytes.decode("utf-8", "replace"), files.pin_path)
    patches = [parse_patch(name, data) for name, data in files.patches]
    series = Series(directory=files.directory, name=files.name, pin=pin, patches=patches, digest=files.digest)
    check_series_against_pin(series)
    return series


def check_series_against_pin(series: Series) -> None:
    """Modified/deleted files must be pinned; created files must not be."""
    created: set[str] = set()
    for fd in series.file_diffs:
        if fd.kind == "create":
            if fd.path in series.pin.files:
                raise InvalidInput(
                    f"{fd.where()}: creates {fd.path}, which is pinned (only absent files may be created)"
                )
            if fd.path in created:
                raise InvalidInput(f"{fd.where()}: creates {fd.path} a second time")
            created.add(fd.path)
        elif fd.path not in series.pin.files and fd.path not in created:
            raise InvalidInput(
                f"{fd.where()}: modifies {fd.path}, which is not listed in pin.toml "
                "(add it with its sha256 and lines)"
            )
