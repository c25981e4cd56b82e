"""A warm interpreter that runs ``python -m MODULE ARGS`` in a fresh process per request (a fork).

Started once per test process by support.cli (``python tests/support/zygote.py FD LIFELINE``),
it imports invoke and patchkit's task collection before any request, so a command's process
does not spend its first half-second importing them. Each request (one SOCK_SEQPACKET
connection on the listening socket FD) brings argv, cwd, environment and three descriptors
(stdin, stdout, stderr); a helper process forks the command's process, which takes those
descriptors, folder, environment and sys.path as ``python -m`` would set them up, runs the module
as ``__main__`` (runpy, as ``-m`` does), waits for its threads, runs its atexit functions and
exits with the code Python would. The helper answers with the pid, then with the wait status.
The zygote ends when the test process does (the lifeline pipe closes).

What an interpreter settles at its own startup from the environment (the standard streams'
encoding, PYTHON* variables other than PYTHONPATH, sitecustomize) is the zygote's, taken from
the test process's environment: a test about those runs its command with
``support.cli.module(..., fresh=True)``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import traceback

del sys.path[0]  # this script's folder (tests/support): its modules are no command's
BASE_PATH = list(sys.path)  # what `python -m` puts the current folder and PYTHONPATH before


def _run_module(module: str, args: list[str]) -> int:
    """``python -m module args`` in this (forked) process: the exit code Python would give."""
    sys.argv = [module, *args]  # runpy puts the module's file in argv[0]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx does first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _command(request: dict, fds: list[int]) -> None:
    """The command's process: never returns."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra, *BASE_PATH]
    code = _run_module(request["module"], request["args"])
    if code < 0:  # an uncaught KeyboardInterrupt: Python ends by the signal itself
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def _serve_one(conn: socket.socket) -> None:
    """The helper process for one request: forks the command, answers pid and wait status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    message, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _command(request, fds)
    for fd in fds:
        os.close(fd)
    conn.send(json.dumps({"pid": pid}).encode())
    _, status = os.waitpid(pid, 0)
    conn.send(json.dumps({"status": status}).encode())
    os._exit(0)


def main(listen_fd: int, lifeline_fd: int) -> None:
    listener = socket.socket(fileno=listen_fd)
    # what the commands import first (not patchkit.command itself: runpy would warn that it was
    # imported before being run as __main__)
    for module in ("invoke.main", "patchkit.boundary", "patchkit.tasks"):
        importlib.import_module(module)

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the helpers are reaped by the kernel
    while True:
        ready, _, _ = select.select([listener, lifeline_fd], [], [])
        if lifeline_fd in ready:
            return
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            os.close(lifeline_fd)
            try:
                _serve_one(conn)
            finally:
                os._exit(1)
        conn.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
