"""Where patchkit finds its shipped series and keeps its caches: a checkout or an installed wheel.

In the checkout the series are the folders of ``patches/`` beside the package, and caches live in
``.cache/`` and ``.work/`` there. An installed wheel carries the same folders as package data in
``patchkit/_series/`` (setup.py maps ``patches/`` there at build time and writes each runtime
patch in place of its marker: patchkit/engine/runtime_patch.py); its caches go to
``$XDG_CACHE_HOME/patchkit`` (``~/.cache/patchkit``), never into site-packages.
``$PATCHKIT_CACHE`` overrides the cache folder in both cases.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
INSTALLED_SERIES = PACKAGE / "_series"


def import_root() -> Path:
    """The folder that holds the ``patchkit`` package: what a subprocess needs on ``PYTHONPATH``."""
    return PACKAGE.parent


def checkout() -> Path | None:
    """The repository root when patchkit runs from its checkout (or an editable install)."""
    root = PACKAGE.parent
    if not INSTALLED_SERIES.is_dir() and (root / "patches").is_dir():
        return root
    return None


def series_root() -> Path:
    """The folder holding one sub-folder per shipped series."""
    root = checkout()
    return root / "patches" if root is not None else INSTALLED_SERIES


def shipped_names() -> list[str]:
    root = series_root()
    return sorted(p.parent.name for p in root.glob("*/pin.toml")) if root.is_dir() else []


def cache_base() -> Path:
    """``$PATCHKIT_CACHE``, else ``<checkout>/.cache``, else ``$XDG_CACHE_HOME/patchkit``."""
    base = os.environ.get("PATCHKIT_CACHE")
    if base:
        return Path(base)
    root = checkout()
    if root is not None:
        return root / ".cache"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "patchkit"


def work_base() -> Path:
    """Scratch trees (the embedded profile default's site): ``<checkout>/.work`` or the cache."""
    root = checkout()
    return root / ".work" if root is not None else cache_base() / "work"


AUTO = "auto"  # --series auto: the shipped series pinned to exactly the target's files


def series_arg(
    value: str, task: str, *, cwd: str | None = None, auto: bool = False, option: str = "--series"
) -> str:
    """A series as every task takes it (``--series``, and patch.diff's ``--from``/``--to``): a
    shipped series' name or a folder (series_path), or ``auto`` where the task has targets to
    read (``auto``: returned as is, the caller picks per target). A task with no target refuses
    ``auto`` as invalid input, saying what to give instead."""
    from patchkit.errors import InvalidInput

    if value == AUTO:
        if auto:
            return AUTO
        raise InvalidInput(
            f"{option} auto: {task} has no target to read, and auto picks the shipped series pinned "
            "to a target's files; name a shipped series (patch.series lists them) or a series folder"
        )
    return series_path(value, cwd, option)


def series_path(value: str, cwd: str | None = None, option: str = "--series") -> str:
    """A ``--series`` value as a folder: a path (relative to ``cwd``) or a shipped series' name.

    A folder that exists wins; a bare name (no ``/``) that is not a folder there names a shipped
    series (``sglang-v0.5.14``), and one that names neither is invalid input. A path comes back
    absolute, and the series loader says what is wrong with it.
    """
    from patchkit.errors import InvalidInput

    expanded = os.path.expanduser(value)
    path = os.path.join(cwd or os.getcwd(), expanded)
    if os.path.isdir(path) or "/" in value or os.sep in value:
        return os.path.abspath(path)
    shipped = series_root() / value
    if (shipped / "pin.toml").is_file():
        return str(shipped)
    import difflib

    close = difflib.get_close_matches(value, shipped_names(), n=3, cutoff=0.6)
    raise InvalidInput(
        f"{option} {value}: no such folder in {cwd or os.getcwd()} and no shipped "
        "series of that name"
        + (
            f" (close: {', '.join(close)})"
            if close
            else f" ({len(shipped_names())} are shipped, e.g. {', '.join(shipped_names()[-2:])})"
        )
    )
