"""Skip marks for optional packages, decided without importing them.

``pytest.importorskip`` at a module's top imports the package while the suite is being collected,
in every test process (torch alone is seconds); ``requires`` asks the import system whether the
package could be imported and leaves the import to the tests that run."""

from __future__ import annotations

import functools
import glob
import importlib.util

import pytest


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a parent package missing, or a broken __spec__
        return True


def requires(*names: str, reason: str = "") -> pytest.MarkDecorator:
    """A skipif mark: skip when any of ``names`` cannot be imported (names the first missing)."""
    missing = [n for n in names if _missing(n)]
    why = f"needs {missing[0]}" + (f": {reason}" if reason else "") if missing else ""
    return pytest.mark.skipif(bool(missing), reason=why)


@functools.cache
def has_cuda() -> bool:
    """Whether torch imports here and sees a CUDA device (imports torch: call it only in a test).
    Without the NVIDIA driver's device nodes CUDA cannot be there, and torch's import (seconds)
    is not paid to hear so."""
    if _missing("torch") or not glob.glob("/dev/nvidia[0-9]*"):
        return False
    import torch

    return bool(torch.cuda.is_available())
