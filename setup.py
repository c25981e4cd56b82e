"""Packages for setuptools (the rest of the metadata is in pyproject.toml).

The shipped series stay in patches/ at the repository root for the checkout and travel in the
wheel as the package data folder patchkit/_series (see patchkit/locations.py). The repository
holds the timing runtime once (patchkit/timing/phase_timer.py): a series folder there holds a
marker, ``0001-phase-timer-runtime.patch.runtime``, in place of its runtime patch. The build
writes each series into the wheel as users get it: the patch rendered from the runtime in
place of its marker (patchkit/engine/runtime_patch.py; ``invoke patch.export`` writes the same
bytes), without the folder's authoring notes (*.md, pyproject.toml's exclude-package-data).
"""

import os
import shutil
import sys

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class build_py_series(build_py):
    """build_py into an emptied build folder, then every series folder there rendered as users
    get it."""

    def run(self):
        if getattr(self, "editable_mode", False):
            super().run()
            return  # an editable install reads patches/ in the checkout, where the markers render
        # build/lib of an earlier build in the checkout (pip builds in place) holds what that
        # build copied, and the wheel takes every file there: start from nothing
        shutil.rmtree(os.path.join(self.build_lib, "patchkit"), ignore_errors=True)
        super().run()
        sys.path.insert(0, HERE)  # this checkout's patchkit (standard library only on this path)
        from patchkit.engine import runtime_patch

        if not os.path.abspath(runtime_patch.__file__).startswith(os.path.join(HERE, "patchkit") + os.sep):
            raise RuntimeError(f"rendering the series needs {HERE}'s patchkit, not {runtime_patch.__file__}")

        root = os.path.join(self.build_lib, "patchkit", "_series")
        for name in sorted(os.listdir(root)):
            if os.path.isdir(os.path.join(root, name)):
                runtime_patch.materialize_in_place(os.path.join(root, name))


setup(
    packages=find_packages(include=["patchkit", "patchkit.*"]) + ["patchkit._series"],
    package_dir={"patchkit._series": "patches"},
    cmdclass={"build_py": build_py_series},
)
