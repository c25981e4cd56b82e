"""The one way a test runs the command line, and any ``python -m MODULE``: module() (invoke(),
invoke_with_config() and patchkit_command() are its usual forms), forked from a warm
interpreter (support/zygote.py) or, where a test needs interpreter startup itself, fresh;
in_process() for the bad-option tables that call the Program hundreds of times; and one way to
start a module as a process, wait for it to reach a point and signal it (Ctrl-C)."""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def module(
    name: str,
    *args: str,
    cwd: str | Path = REPO,
    env: dict | None = None,
    timeout: float = 300,
    fresh: bool = False,
) -> subprocess.CompletedProcess:
    """``python -m NAME ARGS`` (this interpreter) in ``cwd`` with ``env`` (None: this process's
    environment now), stdin closed, output captured as text, killed after ``timeout`` seconds.
    ``fresh``: a new interpreter even where a warm one would do (a test of interpreter startup:
    sitecustomize, PYTHONPATH order)."""
    argv = [sys.executable, "-m", name, *args]
    if fresh:
        return subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
        )
    return _run(argv, cwd, env, timeout)


def invoke(
    *args: str, cwd: str | Path = REPO, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``invoke ARGS`` (this interpreter's) with ``cwd`` (the repository: its tasks.py),
    stdin closed, output captured as text, killed after ``timeout`` seconds."""
    return module("invoke", *args, cwd=cwd, env=env, timeout=timeout)


def in_process(*args: str) -> tuple[int, str, str]:
    """``invoke -r REPO ARGS`` run by invoke's Program in this process (exit code, stdout,
    stderr): for tables of hundreds of option checks, where a process each would cost minutes."""
    import io

    from invoke import Program

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with _yaml_read_once(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            Program().run(["invoke", "-r", str(REPO), *args], exit=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


_YAML_READ: dict[tuple[str, int, int], object] = {}


@contextmanager
def _yaml_read_once() -> Iterator[None]:
    """invoke reads every config file (the repository's invoke.yaml: a commented table of all the
    options) on each run, and parsing it is a third of a run: keep what a file held while its
    path, size and mtime stay the same, and hand each run its own copy."""
    import copy

    from invoke.config import Config

    plain = Config._load_yaml

    def cached(self, path):
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
        if key not in _YAML_READ:
            _YAML_READ[key] = plain(self, path)
        return copy.deepcopy(_YAML_READ[key])

    Config._load_yaml = Config._load_yml = cached  # type: ignore[method-assign]
    try:
        yield
    finally:
        Config._load_yaml = Config._load_yml = plain  # type: ignore[method-assign]


def invoke_with_config(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``invoke -r REPO -f CONFIG ARGS`` run in the config's folder (a test's own settings)."""
    return invoke("-r", str(REPO), "-f", str(config), *args, cwd=config.parent, timeout=timeout)


__all__ = [
    "REPO",
    "in_process",
    "interrupt",
    "invoke",
    "invoke_with_config",
    "module",
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
    return module("patchkit.command", *args, cwd=cwd, env=env, timeout=timeout)


def _run(argv: list, cwd, env, timeout: float) -> subprocess.CompletedProcess:
    """``argv`` in ``cwd``: stdin closed, output captured as text, killed after ``timeout`` s.
    ``python -m MODULE ...`` is forked from a warm interpreter (support/zygote.py) unless
    PATCHKIT_TEST_FRESH_CLI=1 asks for a fresh one each time: the same process, descriptors,
    environment and exit code, without importing invoke and patchkit each time."""
    if os.environ.get("PATCHKIT_TEST_FRESH_CLI") == "1" or argv[:2] != [sys.executable, "-m"]:
        return subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
        )
    return _Zygote.get().run(argv, cwd, dict(os.environ) if env is None else env, timeout)


class _Zygote:
    """The warm interpreter of this test process (one; started at first use, ended with it)."""

    _instance: _Zygote | None = None
    _lock = threading.Lock()

    @classmethod
    def get(cls) -> _Zygote:
        with cls._lock:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls()
            return cls._instance

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="pk-zygote-")
        self.address = os.path.join(self.folder, "s")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.address)
        listener.listen(64)
        lifeline_r, self.lifeline = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("zygote.py")),
                str(listener.fileno()),
                str(lifeline_r),
            ],
            pass_fds=(listener.fileno(), lifeline_r),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        listener.close()
        os.close(lifeline_r)
        atexit.register(self.close)

    def close(self) -> None:
        os.close(self.lifeline)  # the zygote ends on its own
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def run(self, argv: list, cwd, env: dict, timeout: float) -> subprocess.CompletedProcess:
        request = {"module": argv[2], "args": [str(a) for a in argv[3:]], "cwd": str(cwd), "env": env}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(os.devnull, "rb") as devnull:
                conn.connect(self.address)
                socket.send_fds(conn, [json.dumps(request).encode()], [devnull.fileno(), out_w, err_w])
        finally:
            os.close(out_w)
            os.close(err_w)
        pid = json.loads(conn.recv(1 << 16))["pid"]
        output: dict[int, list[bytes]] = {out_r: [], err_r: []}
        status = None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            for fd in (out_r, err_r, conn.fileno()):
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    _kill(pid)
                    for fd in (out_r, err_r):
                        os.close(fd)
                    conn.close()
                    raise subprocess.TimeoutExpired(
                        argv, timeout, b"".join(output[out_r]), b"".join(output[err_r])
                    )
                for key, _ in sel.select(left):
                    if key.fd == conn.fileno():
                        answer = conn.recv(1 << 16)
                        if answer:
                            status = json.loads(answer)["status"]
                        sel.unregister(key.fd)
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        output[key.fd].append(chunk)
                    else:
                        sel.unregister(key.fd)
        conn.close()
        for fd in (out_r, err_r):
            os.close(fd)
        if status is None:
            raise RuntimeError(f"the zygote lost {argv[2:]} (pid {pid})")
        return subprocess.CompletedProcess(
            argv, os.waitstatus_to_exitcode(status), _text(output[out_r]), _text(output[err_r])
        )


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _text(chunks: list[bytes]) -> str:
    """Bytes as subprocess's text mode gives them: locale encoding, universal newlines."""
    data = b"".join(chunks).decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")


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
    with_stdout: bool = False,
):
    """After ``settle`` seconds, ``sig`` to ``proc`` (to its whole process group when ``group``,
    as a terminal's Ctrl-C); its stderr once it exited (at most ``timeout`` seconds), or
    (stdout, stderr) ``with_stdout``."""
    time.sleep(settle)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    return (out, err) if with_stdout else err
