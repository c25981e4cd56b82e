"""A series folder as users get it, for the tests that hand its patch files to another tool
(git apply, quilt) or read them as files: ``patch.export`` of the checkout's folder, where the
runtime patch is rendered from patchkit/timing/phase_timer.py in place of its marker.

The export is written once per test process into a private temporary folder (removed at exit);
read it, do not write to it.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path

from patchkit.author import authoring


@cache
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="pk-exported-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@cache
def exported(series_dir: Path) -> Path:
    """``series_dir`` exported (every file; the runtime patch rendered): the folder's path."""
    return authoring.export_series(Path(series_dir), _root() / str(len(list(_root().iterdir()))))[0]


def patch_text(series_dir: Path, name: str) -> str:
    """Patch ``name`` of the series as the engine reads it (its marker rendered, if it has one)."""
    return authoring.read_patch(Path(series_dir), name)
