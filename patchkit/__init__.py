"""patchkit: pinned unified-diff series applied as exact, line-targeted sed edits."""

import sys

__version__ = "0.1.0"

# The controller's Python floor, as pyproject's requires-python states it (tomllib is 3.11+).
# The files sent to targets (profile/remote/agent.py, timing/phase_timer.py) are not imported
# there and keep their own, lower floor.
MIN_PYTHON = (3, 11)

if tuple(sys.version_info[:2]) < MIN_PYTHON:
    raise ImportError(
        f"patchkit needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer; this is "
        f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    )
