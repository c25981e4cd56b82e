"""`invoke …` in the checkout: the tasks live in the package (patchkit/tasks.py).

The installed `patchkit` command (patchkit/command.py) serves the same collection; this file only
makes the checkout's package importable and hands invoke that collection.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from patchkit import tasks as _tasks
from patchkit.tasks import ns  # noqa: F401


def __getattr__(name):
    """`import tasks; tasks._resolve(...)` keeps working for code written against this file."""
    return getattr(_tasks, name)
