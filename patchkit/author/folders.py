"""Writing a series folder whole or not at all (patch.rebase's output, patch.export)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from patchkit.errors import InvalidInput


def umask() -> int:
    """The process's umask, read without changing it."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_new_folder(out: Path, files: dict[str, bytes], task: str) -> None:
    """Write ``files`` (name -> bytes) as the new folder ``out``: built beside it and renamed
    into place, so it appears whole or not at all; an existing non-empty ``out`` is refused,
    the message naming ``task``."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidInput(f"{task}: {out} already exists; remove it or pass another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        os.chmod(tmp, 0o777 & ~umask())
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
