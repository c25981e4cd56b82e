"""One way for a test to run the command line: ``python -m invoke ...`` in the repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def invoke(
    *args: str, cwd: str | Path = REPO, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``invoke ARGS`` (this interpreter's) with ``cwd`` (the repository: its tasks.py),
    stdin closed, output captured as text, killed after ``timeout`` seconds."""
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def invoke_with_config(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``invoke -r REPO -f CONFIG ARGS`` run in the config's folder (a test's own settings)."""
    return invoke("-r", str(REPO), "-f", str(config), *args, cwd=config.parent, timeout=timeout)


__all__ = ["REPO", "invoke", "invoke_with_config"]
