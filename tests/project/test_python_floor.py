"""The Python floor: pyproject's requires-python, the package's own check and the code agree.

patchkit states Python >= 3.11 (it reads TOML with the standard library's tomllib, new in 3.11).
On an older interpreter ``import patchkit`` refuses with one clear line instead of failing on
the first tomllib import somewhere inside. The files sent to targets (the remote agent, the
timing runtime) are not imported by the controller and keep their own, lower floor.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import patchkit

REPO = Path(__file__).resolve().parents[2]
# Sent to targets as text, run by the target's own python (their docstrings state the floor).
TARGET_SIDE = {"profile/remote/agent.py": (3, 8), "timing/phase_timer.py": (3, 8)}


def _stated_floor() -> tuple[int, int]:
    spec = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec.strip())
    assert m, f"requires-python {spec!r} is not a plain lower bound"
    return int(m.group(1)), int(m.group(2))


def test_requires_python_is_the_floor_the_package_checks():
    assert _stated_floor() == patchkit.MIN_PYTHON


def _controller_files():
    for path in sorted((REPO / "patchkit").rglob("*.py")):
        rel = path.relative_to(REPO / "patchkit").as_posix()
        if rel not in TARGET_SIDE:
            yield path
    yield REPO / "tasks.py"


def test_controller_code_parses_with_the_floors_grammar():
    floor = patchkit.MIN_PYTHON
    checked = 0
    for path in _controller_files():
        ast.parse(path.read_text(), str(path), feature_version=floor)
        checked += 1
    assert checked > 40


def test_target_side_files_parse_with_their_own_floor():
    for rel, floor in TARGET_SIDE.items():
        path = REPO / "patchkit" / rel
        ast.parse(path.read_text(), str(path), feature_version=floor)


def test_every_tomllib_import_is_behind_the_floor():
    """tomllib exists from 3.11: it may only be imported where the floor is >= 3.11."""
    users = [
        p
        for p in _controller_files()
        if re.search(r"^\s*import tomllib|^\s*from tomllib", p.read_text(), re.M)
    ]
    assert users, "expected the TOML readers (pin.py)"
    assert patchkit.MIN_PYTHON >= (3, 11)


def test_an_older_python_is_refused_with_one_clear_line():
    # The only interpreter here is the floor itself; an older one is simulated by lowering
    # sys.version_info before the import (the check reads nothing else).
    code = (
        "import sys; sys.version_info = (3, 10, 14, 'final', 0)\n"
        "try:\n    import patchkit\nexcept ImportError as e:\n    print(e); sys.exit(3)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert run.returncode == 3, run.stderr
    assert run.stdout.strip() == "patchkit needs Python 3.11 or newer; this is Python 3.10"
    ok = subprocess.run(
        [sys.executable, "-c", "import patchkit.engine.series"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
