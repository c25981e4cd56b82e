"""Ctrl-C while a command starts or after its task ended: one line, never a traceback or silence.

Python turns SIGINT into KeyboardInterrupt wherever the program is. While ``invoke`` (or the
installed ``patchkit``) imports itself and loads the tasks, that meant a traceback (in an
import) or invoke's silent exit 1 (its ``except KeyboardInterrupt``), although nothing had
started. So a patchkit program takes SIGINT over as early as it can, with a handler that prints
one line and exits at once:

- starting (up to the task's exit boundary, patchkit.boundary): ``patchkit: interrupted while
  starting; nothing was started on any target``, exit 130;
- inside the task's boundary, Python's own handler is back (``task_began``): KeyboardInterrupt
  goes where the task's cleanup is, and the boundary says what it cleaned up (exit 130);
- after the task (``task_ended``): ``patchkit: interrupted as it exited; the task had ended,
  nothing was cut short``, with the task's own exit code (a finished apply stays exit 0); the
  interpreter's own exit after the last exit function is skipped (``_exiting``), since Python
  resets the handler there and a SIGINT would end it silently.

As early as it can: the venv ``make setup`` makes carries ``patchkit-startup.pth`` (written by
``python -m patchkit.startup install``), which site runs at every interpreter start and which
installs the handler when the program is ``invoke``, ``inv`` or ``patchkit`` (``sys.orig_argv``),
before invoke imports itself; where that file is missing (an ``invoke`` of another venv, a pipx
install), the top of tasks.py and of patchkit/command.py install it, each the program's first
own import. The interpreter's first milliseconds, before site runs, belong to no program: a
SIGINT there ends Python as it ends any program. Only in the main thread of a program started
as one of these; a process that imported patchkit as a library (pytest, the tests' in-process
runs) keeps Python's handler. Standard library only: site imports this before the venv is set.
"""

from __future__ import annotations

# as little as possible before the handler is in place: os and sys are loaded at start already,
# and _signal is the C module under signal (signal.py imports enum, functools, collections: the
# longest part of this module's import, at the instant it matters most)
import _signal as signal  # type: ignore[import-not-found]  # no stub: signal.py re-exports it
import os
import sys

PROGRAMS = ("invoke", "inv", "patchkit")  # console scripts
MODULES = ("invoke", "patchkit.command")  # python -m ...
STARTING = "interrupted while starting; nothing was started on any target"
ENDED = "interrupted as it exited; the task had ended, nothing was cut short"
EXIT_INTERRUPTED = 130  # patchkit.errors.EXIT_INTERRUPTED (not imported: site runs this first)

PTH_NAME = "patchkit-startup.pth"
# site executes a .pth line that starts with "import"; one line, so the body goes through exec.
# The words tested first keep every other interpreter of the venv (pytest, pip) from importing
# patchkit at its start; started_as_program decides exactly.
PTH_LINE = (
    "import sys; exec(\"if any(w.endswith(('invoke', 'inv', 'patchkit', 'patchkit.command')) "
    "for w in sys.orig_argv[1:4]):\\n try:\\n  import patchkit.startup as s\\n except ImportError:\\n"
    '  pass\\n else:\\n  s.install_if_program()")\n'
)


class _State:
    depth = 0  # task boundaries entered and not left
    began = False  # the outermost one was entered: once it is left, the task has ended
    ended_code = 0  # the outermost task boundary's exit code


_STATE = _State()


def started_as_program(argv: list[str] | None = None) -> bool:
    """Whether this interpreter was started as invoke or patchkit: a console script of one of
    those names, or ``python [options] -m invoke`` / ``-m patchkit.command``."""
    argv = list(sys.orig_argv if argv is None else argv)
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, "") in MODULES
        if arg in ("-c", "-"):
            return False
        if arg in ("-X", "-W", "-Q"):
            next(args, None)
            continue
        if arg.startswith("-"):
            continue
        return os.path.basename(arg) in PROGRAMS
    return False


def _say_and_exit(sig, frame) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # one line, whatever comes after
    ended = _STATE.began and _STATE.depth == 0
    _flush()  # no import here: the interrupt may have come in the middle of one
    try:  # noqa: SIM105
        os.write(2, f"patchkit: {ENDED if ended else STARTING}\n".encode())
    except OSError:
        pass
    os._exit(_STATE.ended_code if ended else EXIT_INTERRUPTED)


def ours() -> bool:
    """The handler installed here is SIGINT's handler now."""
    return signal.getsignal(signal.SIGINT) is _say_and_exit


def install() -> bool:
    """The start-up handler, in the main thread, where SIGINT has Python's own handler (an
    inherited SIG_IGN, a background job's, stays). Whether it is in place."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _say_and_exit)
        except ValueError:  # not the main thread: signals are the main thread's
            return False
        import atexit

        atexit.register(_exiting)  # registered first, so it runs last
    return ours()


def _exiting() -> None:
    """At interpreter exit, after every other atexit function: what is left of Python's exit
    (its modules torn down, tens of milliseconds) has no handler of ours (Python resets it, and
    a SIGINT there would end the process silently). After a task: its output flushed, exit now
    with the task's code. Otherwise (--list, --help, a parse error: nothing done, the code not
    known here): ignore SIGINT for those last milliseconds."""
    if not ours():
        return
    if _STATE.began and _STATE.depth == 0:
        _flush()
        os._exit(_STATE.ended_code)
    _set(signal.SIG_IGN)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105
            stream.flush()
        except Exception:  # a closed or broken stream: nothing more to say on it
            pass


def install_if_program() -> bool:
    """install() when this interpreter was started as invoke or patchkit (started_as_program)."""
    return started_as_program() and install()


def task_began() -> None:
    """A task's exit boundary is entered: Python's handler back for the outermost one (its
    KeyboardInterrupt reaches the task's cleanup), where the start-up handler was in place."""
    if _STATE.depth == 0 and not ours():
        return
    _STATE.depth += 1
    if _STATE.depth == 1:
        _STATE.began = True
        _set(signal.default_int_handler)


def task_ended(code: int) -> None:
    """The task's boundary is left with ``code``: after the outermost one, the handler again,
    now saying the task had ended and exiting with ``code``."""
    if _STATE.depth == 0:
        return
    _STATE.depth -= 1
    if _STATE.depth == 0:
        _STATE.ended_code = code
        _set(_say_and_exit)


def _set(handler) -> None:
    """SIGINT's handler, from the main thread (elsewhere signal.signal refuses: nothing to do)."""
    try:  # noqa: SIM105  (contextlib may not be loaded this early)
        signal.signal(signal.SIGINT, handler)
    except ValueError:
        pass


def install_pth(site_packages: str | None = None):
    """Write patchkit-startup.pth into this interpreter's site-packages (``make setup``)."""
    import sysconfig
    from pathlib import Path

    folder = Path(site_packages or sysconfig.get_paths()["purelib"])
    path = folder / PTH_NAME
    if not path.is_file() or path.read_text() != PTH_LINE:
        path.write_text(PTH_LINE)
    return path


def main(argv: list[str]) -> int:
    if argv != ["install"]:
        print("usage: python -m patchkit.startup install", file=sys.stderr)
        return 2
    print(f"wrote {install_pth()} (Ctrl-C while invoke or patchkit starts: one line)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
