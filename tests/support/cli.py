"""One way for a test to run the command line: ``python -m invoke ...`` in the repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def invoke(
    *args: str, cwd: str | Path = REPO, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``invoke ARGS`` (this interpreter's) with ``cwd`` (the repository: its tasks.py),
    stdin closed, output captured as text, killed after ``timeout`` seconds."""
    return _run([sys.executable, "-m", "invoke", *args], cwd, env, timeout)


def invoke_with_config(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``invoke -r REPO -f CONFIG ARGS`` run in the config's folder (a test's own settings)."""
    return invoke("-r", str(REPO), "-f", str(config), *args, cwd=config.parent, timeout=timeout)


__all__ = ["REPO", "invoke", "invoke_with_config", "patchkit_command"]


def patchkit_command(
    args, cwd: Path, config_home: Path, home: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """The installed command's Program (``python -m patchkit.command ARGS``) in ``cwd``, as
    a user's shell would run it: no INVOKE_* variables, XDG_CONFIG_HOME at ``config_home``
    (and HOME at ``home`` when given), this checkout on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}
    env.update(PYTHONPATH=str(REPO), XDG_CONFIG_HOME=str(config_home))
    if home is not None:
        env["HOME"] = str(home)
    return _run([sys.executable, "-m", "patchkit.command", *args], cwd, env, timeout)


def _run(argv: list, cwd, env, timeout: float) -> subprocess.CompletedProcess:
    """``argv`` in ``cwd``: stdin closed, output captured as text, killed after ``timeout`` s."""
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
    )
