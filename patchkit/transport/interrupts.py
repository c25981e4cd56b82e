"""Ctrl-C, SIGTERM and SIGHUP while target programs run: each program is told, and waited for.

Inside ``deferred()`` (the patch tasks enter it around an operation) the first signal before
any target program has started raises at once, as usual. Once one has started, a signal is only
noted: every transport that has a program running sends it the same signal (``kill -INT PID``
through the same transport, so over SSH and into containers too; the program says its PID
first) and reads on until the program has ended. The program cleans up after itself (target.sh
``pk_signal``): it removes its lock, staged files and copies, or lets a commit, restore or
unstage it had begun run to its end. The run then raises ``interrupted(...)``: a
KeyboardInterrupt (Terminated for SIGTERM) whose ``run_result`` is what the program answered,
unless the program ended with exit 0 (its work was complete), which returns as usual. A run
that would start after the signal raises at once, starting nothing.

Target programs run in a session of their own (the transports start them so), so a terminal's
Ctrl-C reaches the program once, through here, and never the commands it runs (a ``mv``
killed half-way through its renames).
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from patchkit.errors import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated

# what each signal's program exits with (128 + the signal's number, as target.sh's traps)
EXIT_HANGUP = 129
_EXIT_OF: dict[int, int] = {
    signal.SIGINT: EXIT_INTERRUPTED,
    signal.SIGTERM: EXIT_TERMINATED,
    signal.SIGHUP: EXIT_HANGUP,
}
_NAME_OF: dict[int, str] = {signal.SIGINT: "INT", signal.SIGTERM: "TERM", signal.SIGHUP: "HUP"}


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = False  # inside deferred()
        self.started = False  # a target program has started since deferred() began
        self.noted: int | None = None  # the signal noted (the first one)
        self.cleaning = 0  # runs started by cleanup_runs(): never signalled, never refused
        self.exit_hook = False  # _ignore_while_exiting registered


_STATE = _State()


def active() -> bool:
    """Inside deferred(): the transports start their programs in a session of their own."""
    return _STATE.active


def requested() -> int | None:
    """The signal noted during this operation (signal.SIGINT, SIGTERM, SIGHUP), or None."""
    return _STATE.noted


def signal_name(sig: int) -> str:
    return _NAME_OF.get(sig, "INT")


def exit_code(sig: int) -> int:
    return _EXIT_OF.get(sig, EXIT_INTERRUPTED)


def interrupted(sig: int, message: str = "", run_result=None) -> KeyboardInterrupt:
    """The exception a noted signal becomes: Terminated for SIGTERM, else KeyboardInterrupt;
    ``message`` is what patchkit.boundary says after "interrupted;"."""
    exc: KeyboardInterrupt = Terminated(message) if sig == signal.SIGTERM else KeyboardInterrupt(message)
    exc.run_result = run_result  # type: ignore[attr-defined]
    exc.signal = sig  # type: ignore[attr-defined]
    return exc


def _handler(sig, frame) -> None:
    if _STATE.noted is None:
        _STATE.noted = sig
    if not _STATE.started:
        raise interrupted(sig)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """The body's signals, as the module docstring says (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread() or _STATE.active:
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.getsignal(s) for s in sigs}
    _STATE.active, _STATE.started, _STATE.noted = True, False, None
    ended = False
    try:
        for s in sigs:
            if previous[s] is not signal.SIG_IGN:  # nohup's SIGHUP stays ignored
                signal.signal(s, _handler)
        yield
        ended = True
    except SystemExit:
        ended = True
        raise
    finally:
        late = ended and _STATE.started
        for s in sigs:
            # after an operation whose programs ran has ended (its answer printed, the process
            # about to exit with its code), one more signal is swallowed: it would otherwise
            # turn a finished "wrote: ..." into an interrupted exit on the way out
            keep = previous[s] is signal.SIG_IGN or not late
            signal.signal(s, previous[s] if keep else _swallow_once(previous))
        if late and not _STATE.exit_hook:
            _STATE.exit_hook = True
            atexit.register(_ignore_while_exiting)
        _STATE.active, _STATE.started, _STATE.noted = False, False, None


class _Swallow:
    """A signal handler that says the operation had ended and restores ``previous`` (a second
    signal acts as usual)."""

    def __init__(self, previous: dict) -> None:
        self.previous = previous

    def __call__(self, sig, frame) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)
        with contextlib.suppress(Exception):  # never a second failure on the way out
            print(
                "patchkit: interrupted after the targets had answered; nothing was cut short", file=sys.stderr
            )


def _swallow_once(previous: dict) -> _Swallow:
    return _Swallow(previous)


def _ignore_while_exiting() -> None:
    """At interpreter exit, where the swallowing handlers are still in place: ignore the
    signals, as Python resets its own handlers to the default (death by the signal) while it
    finalizes, after the answer was printed."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if isinstance(signal.getsignal(s), _Swallow):
            signal.signal(s, signal.SIG_IGN)


def program_starting() -> None:
    """Before a transport starts a target program: raise when a signal was noted (nothing is
    started then), else mark that one runs (from now on signals are delivered, not raised)."""
    if _STATE.cleaning:
        return
    sig = _STATE.noted
    if sig is not None:
        raise interrupted(sig)
    if _STATE.active:
        _STATE.started = True


def deliverable() -> int | None:
    """The signal a running program should get now (None: none, or a cleanup run's)."""
    return None if _STATE.cleaning else _STATE.noted


@contextlib.contextmanager
def cleanup_runs() -> Iterator[None]:
    """Runs that clean up after an interrupt (a fleet unstaging or reverting its hosts): they
    start although a signal was noted, and are not signalled."""
    with _STATE.lock:
        _STATE.cleaning += 1
    try:
        yield
    finally:
        with _STATE.lock:
            _STATE.cleaning -= 1


def kill_program(pid: int, sig: int) -> bytes:
    """The one-line program that sends ``sig`` to the target program ``pid`` (on the target)."""
    return f"kill -s {signal_name(sig)} {int(pid)} 2>/dev/null; :\n".encode()
