"""Remember compiled series on this machine, keyed by what they were compiled from.

Parsing and planning a series of several hundred diffs costs about a second; the result depends
only on the bytes of pin.toml, the series file and every patch (the series digest), the folder's
name and the code that compiles them. The cache stores the rendered target data (sed scripts,
file table, printf functions) as JSON under ``$PATCHKIT_CACHE/compiled`` (default
``<repo>/.cache/compiled``), one file per key. A hit skips parsing and planning and nothing
else: the target program, and every check it makes on the target, are the same bytes either
way. ``PATCHKIT_COMPILE_CACHE=off`` turns it off. A damaged, unreadable or unwritable cache is
ignored (it is only ever a shortcut).

The precise per-hunk plans are not stored: a drift report, the one place that needs them, recompiles.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from patchkit.engine.plan import FilePlan
from patchkit.engine.series import Pin, PinnedFile, Series, SeriesFiles, load_series, read_series
from patchkit.engine.targetprog import Compiled, compile_series
from patchkit.locations import cache_base

FORMAT = 2  # 2: every field of the pin is kept (also_versions was lost)
KEEP = 32  # entries kept; older ones are removed when a new one is written
_SOURCES = (
    "engine/diffparse.py",
    "engine/difftext.py",
    "engine/series.py",
    "engine/plan.py",
    "engine/render.py",
    "engine/targetprog.py",
    "paths.py",
    "errors.py",
    "engine/compilecache.py",
)


def enabled() -> bool:
    return os.environ.get("PATCHKIT_COMPILE_CACHE", "on").lower() not in ("off", "0", "no", "false")


def cache_dir() -> Path:
    base = os.environ.get("PATCHKIT_CACHE")
    root = Path(base) if base else cache_base()
    return root / "compiled"


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the modules whose output is cached (and of unidiff's version)."""
    h = hashlib.sha256(str(FORMAT).encode())
    here = os.path.dirname(os.path.dirname(__file__))  # patchkit/
    for name in _SOURCES:
        with open(os.path.join(here, name), "rb") as fh:
            h.update(name.encode() + b"\0" + fh.read())
    try:
        from importlib.metadata import version

        h.update(version("unidiff").encode())
    except Exception:  # no metadata: the module hashes above still key it
        pass
    return h.hexdigest()


def key(digest: str, name: str, full: bool) -> str:
    return hashlib.sha256(f"{code_version()} {digest} {name} {int(full)}".encode()).hexdigest()


def compiled_series(series: str | Series, full: bool = True) -> Compiled:
    """`compile_series` for a folder (or a loaded Series), through the cache when enabled."""
    if not enabled():
        return compile_series(series if isinstance(series, Series) else load_series(series), full=full)
    files: Series | SeriesFiles = series if isinstance(series, Series) else read_series(series)
    k = key(files.digest, files.name, full)
    path = cache_dir() / f"{k}.json"
    hit = _load(path, files)
    if hit is not None:
        return hit
    loaded = files if isinstance(files, Series) else load_series(files)
    compiled = compile_series(loaded, full=full)
    _store(path, compiled)
    return compiled


def _pin_json(pin: Pin) -> dict:
    """Every field of the pin (a field added to Pin is kept without touching this), the files
    as [path, sha256, lines] rows."""
    data = {f.name: getattr(pin, f.name) for f in fields(Pin) if f.name != "files"}
    data["files"] = [[f.path, f.sha256, f.lines] for f in pin.files.values()]
    return data


def _pin_from_json(data: dict) -> Pin:
    scalars: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "files"
    }
    return Pin(files={f[0]: PinnedFile(f[0], f[1], f[2]) for f in data["files"]}, **scalars)


def _store(path: Path, c: Compiled) -> None:
    data = {
        "format": FORMAT,
        "pin": _pin_json(c.series.pin),
        "name": c.series.name,
        "digest": c.series.digest,
        "full": c.full,
        "common": c.common,
        "stage_funcs": c.stage_funcs,
        "multi": c.multi,
        "single": c.single,
        "plans": [[p.path, p.kind, p.executable] for p in c.plans],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            json.dump(data, fh, ensure_ascii=False)
        os.replace(tmp, path)
        _prune(path.parent)
    except OSError:
        pass


def _prune(directory: Path) -> None:
    entries = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _load(path: Path, files: SeriesFiles | Series) -> Compiled | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            data = json.load(fh)
        if data.get("format") != FORMAT or data["digest"] != files.digest or data["name"] != files.name:
            return None
        pin = _pin_from_json(data["pin"])
        pinned = pin.files
        series = Series(
            directory=files.directory, name=data["name"], pin=pin, patches=[], digest=data["digest"]
        )
        plans = [
            FilePlan(path=path_, kind=kind, pinned=pinned.get(path_), executable=ex)
            for path_, kind, ex in data["plans"]
        ]
        directory = files.directory
        full = data["full"]
        return Compiled(
            series=series,
            plans=plans,
            common=data["common"],
            stage_funcs=data["stage_funcs"],
            multi=data["multi"],
            single=data["single"],
            full=full,
            detail=lambda: compile_series(load_series(directory), full=True).plans,
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


__all__ = ["cache_dir", "compiled_series", "enabled", "key"]
