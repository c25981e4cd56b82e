"""`invoke …` in the checkout: the tasks live in the package (patchkit/tasks.py).

The installed `patchkit` command (patchkit/command.py) serves the same collection; this file only
makes the checkout's package importable and hands invoke that collection.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Ctrl-C from here on, while the tasks load: one line and exit 130 (patchkit.startup), where the
# venv's patchkit-startup.pth did not already take SIGINT over before invoke imported itself
from patchkit import startup

startup.install_if_program()

from patchkit import tasks as _tasks  # noqa: E402
from patchkit.tasks import ns  # noqa: E402, F401


def __getattr__(name):
    """`import tasks; tasks._resolve(...)` keeps working for code written against this file."""
    return getattr(_tasks, name)
