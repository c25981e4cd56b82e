"""One way for a test to run the command line: ``python -m invoke ...`` in the repository; and
one way to start a module as a process, wait for it to reach a point and signal it (Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


__all__ = [
    "REPO",
    "interrupt",
    "invoke",
    "invoke_with_config",
    "patchkit_command",
    "popen_module",
    "wait_for",
]


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


# -- a process a test signals (Ctrl-C, SIGTERM) while it runs ----------------------------------------


@contextmanager
def popen_module(module: str, *args: str, cwd: Path) -> Iterator[subprocess.Popen]:
    """``python -m MODULE ARGS`` in ``cwd``, started in a session of its own (a signal to its
    group reaches nothing else), this checkout on PYTHONPATH, stdout and stderr piped as text;
    killed on the way out when it still runs (a failed assertion leaves nothing behind)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=str(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def wait_for(proc: subprocess.Popen, path: Path, timeout: float) -> bool:
    """Until ``path`` exists, ``proc`` ended or ``timeout`` seconds passed: whether it exists."""
    deadline = time.monotonic() + timeout
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.exists()


def interrupt(
    proc: subprocess.Popen,
    sig: int = signal.SIGINT,
    *,
    settle: float = 0.0,
    group: bool = False,
    timeout: float = 60,
) -> str:
    """After ``settle`` seconds, ``sig`` to ``proc`` (to its whole process group when ``group``,
    as a terminal's Ctrl-C); its stderr once it exited (at most ``timeout`` seconds)."""
    time.sleep(settle)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    _out, err = proc.communicate(timeout=timeout)
    return err
