"""The timing runtime that patch series insert into target packages.

`phase_timer.py` beside this file is the runtime's one copy: every series' runtime patch is
rendered from it whenever the series is read (patchkit/engine/runtime_patch.py).
This package does not import the runtime itself (importing it registers an atexit hook).
"""

from pathlib import Path

RUNTIME_PATH = Path(__file__).with_name("phase_timer.py")


def runtime_source() -> str:
    """The runtime's exact text, as it must appear in a target package."""
    return RUNTIME_PATH.read_text(encoding="utf-8")


def runtime_bytes() -> bytes:
    """The runtime's exact bytes (for hashing and byte-for-byte comparison)."""
    return RUNTIME_PATH.read_bytes()
