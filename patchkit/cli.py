"""The one exit-code boundary of every command line (invoke tasks and each ``main()``).

Inside ``exit_boundary``, code raises; at its edge an expected failure becomes one line on stderr
and the contract's exit code (patchkit.errors): the error root ``PatchkitError`` its own code
(1 refused, 2 invalid input), Ctrl-C 130, SIGTERM (``Terminated``) 143. With ``--json`` the same
failure is also one JSON document on stdout (patchkit.output.error_json), so a machine reading
stdout always gets one. Anything else is a bug and keeps its traceback.

    with exit_boundary("patchkit", json_op="apply" if as_json else None):
        ...

    @main_boundary("profile", interrupted="servers stopped, targets reverted")
    def main(argv=None) -> int: ...
"""

from __future__ import annotations

import functools
import json
import sys
from contextlib import contextmanager

from patchkit.errors import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_TERMINATED, PatchkitError, Terminated

# the --json document of every patch.* task (README: "JSON output"); error_json is the one an
# operation prints when it ended before it had a result
RESULT_SCHEMA = "patchkit.result/1"


def error_json(op: str, exit_code: int, message: str) -> str:
    """The document of an operation that ended before it had a result (invalid input, refused
    --series auto, interrupted): the success document's keys, with ``error`` set."""
    doc: dict[str, object] = {
        "schema": RESULT_SCHEMA,
        "op": op,
        "series": None,
        "digest": None,
        "exit_code": exit_code,
        "error": message,
        "hosts": [],
    }
    return json.dumps(doc, indent=2, sort_keys=True)


def failure_of(exc: BaseException, interrupted: str = "") -> tuple[int, str] | None:
    """(exit code, message) for an expected failure; None for anything else (a bug)."""
    if isinstance(exc, PatchkitError):
        return exc.exit_code, exc.message
    if isinstance(exc, KeyboardInterrupt):
        # an interrupt raised with a message says itself what was (not) cleaned up
        said = str(exc.args[0]) if exc.args and exc.args[0] else interrupted
        if isinstance(exc, Terminated):
            return EXIT_TERMINATED, "terminated (SIGTERM)" + (f"; {said}" if said else "")
        return EXIT_INTERRUPTED, "interrupted" + (f"; {said}" if said else "")
    return None


def one_line(message: str) -> str:
    """A message as one line: inner newlines become ' | ' (a remote's stderr may carry some)."""
    return " | ".join(part.strip() for part in str(message).splitlines() if part.strip())


@contextmanager
def exit_boundary(prog: str = "patchkit", *, interrupted: str = "", json_op: str | None = None):
    """Map what the body raises to a message and ``SystemExit(code)`` (module docstring).

    ``interrupted``: what was cleaned up, said after "interrupted;" / "terminated (SIGTERM);".
    ``json_op``: with --json, also print the error document for this operation on stdout."""
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        failure = failure_of(exc, interrupted)
        if failure is None:
            raise
        code, message = failure
        message = one_line(message)
        if json_op is not None:
            sys.stdout.write(error_json(json_op, code, message) + "\n")
            sys.stdout.flush()
        print(f"{prog}: {message}", file=sys.stderr)
        raise SystemExit(code) from None


def main_boundary(prog: str, *, interrupted: str = ""):
    """Decorator for ``main(argv=None) -> int``: the boundary, with its code returned."""

    def wrap(fn):
        @functools.wraps(fn)
        def main(*args, **kwargs) -> int:
            try:
                with exit_boundary(prog, interrupted=interrupted):
                    return fn(*args, **kwargs)
            except SystemExit as exc:
                code = exc.code
                if code is None:
                    return 0
                return code if isinstance(code, int) else 1

        return main

    return wrap


def task(*args, prog: str = "patchkit", interrupted: str = "", **kwargs):
    """invoke's ``@task`` with the body inside ``exit_boundary``: every task maps its failures
    the same way (``interrupted``: what the task cleaned up, said after "interrupted;")."""
    from invoke import task as invoke_task

    def decorate(body):
        @functools.wraps(body)
        def bounded(*a, **kw):
            label = body.__name__ + (" --dry-run" if kw.get("dry_run") else "")
            with exit_boundary(
                prog, interrupted=interrupted, json_op=label if kw.get("json") is True else None
            ):
                refuse_empty(kw)
                return body(*a, **kw)

        return invoke_task(*args, **kwargs)(bounded)

    if len(args) == 1 and callable(args[0]) and not kwargs:
        body, args = args[0], ()
        return decorate(body)
    return decorate


def refuse_empty(given: dict) -> None:
    """An option given an empty value (``--series ''``, ``--dest ' '``) is invalid input, for
    every task: left alone it would fall back to a default, or to the current folder."""
    from patchkit.errors import InvalidInput

    for name, value in given.items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            flag = "--" + name.rstrip("_").replace("_", "-")
            raise InvalidInput(f"{flag} {value!r}: an empty value")


# -- the patch.* tasks with a target (check, verify, apply, revert, status, unlock) ----------------


def program_class():
    """An ``invoke.Program`` whose command-line parse errors (an unknown option such as
    ``--jobz``, a missing value) exit 2, invalid input, as the contract says; invoke's own
    Program exits 1 for them. For an installed ``patchkit`` command built on invoke."""
    from invoke import Exit, Program
    from invoke.exceptions import ParseError

    class PatchkitProgram(Program):
        def parse_core(self, argv):
            try:
                super().parse_core(argv)
            except ParseError as exc:
                raise Exit(f"patchkit: {one_line(str(exc))}", EXIT_INVALID) from None

        def parse_tasks(self):
            try:
                super().parse_tasks()
            except ParseError as exc:
                raise Exit(f"patchkit: {one_line(str(exc))}", EXIT_INVALID) from None

    return PatchkitProgram
