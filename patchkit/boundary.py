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

from patchkit import startup
from patchkit.errors import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_TERMINATED, PatchkitError, Terminated

# the --json document of every patch.* task (docs/tasks.md: "JSON output"); error_json is the one an
# operation prints when it ended before it had a result
RESULT_SCHEMA = "patchkit.result/2"


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
        "proven": None,
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
    ``json_op``: with --json, also print the error document for this operation on stdout.
    In a program whose start-up handler holds SIGINT (patchkit.startup), the outermost boundary
    gives Python's own back for its body, and the start-up one takes over again once it is left."""
    code = 0
    try:
        startup.task_began()  # inside the try: an interrupt right after it is this body's
        yield
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            raise
        failure = failure_of(exc, interrupted)
        if failure is None:
            code = 1
            raise
        code, message = failure
        message = one_line(message)
        if json_op is not None:
            sys.stdout.write(error_json(json_op, code, message) + "\n")
            sys.stdout.flush()
        print(f"{prog}: {message}", file=sys.stderr)
        raise SystemExit(code) from None
    finally:
        startup.task_ended(code)


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


def task(*args, prog: str = "patchkit", interrupted: str = "", before=None, **kwargs):
    """invoke's ``@task`` with the body inside ``exit_boundary``: every task maps its failures
    the same way (``interrupted``: what the task cleaned up, said after "interrupted;").
    ``before(c)``: run first, inside the boundary (patchkit.tasks checks the config files)."""
    from invoke import task as invoke_task

    def decorate(body):
        @functools.wraps(body)
        def bounded(*a, **kw):
            label = body.__name__ + (" --dry-run" if kw.get("dry_run") else "")
            with exit_boundary(
                prog, interrupted=interrupted, json_op=label if kw.get("json") is True else None
            ):
                if before is not None and a:
                    before(a[0])
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


def did_you_mean(word: str, candidates) -> str:
    """ " (did you mean X?)" for the closest candidate (difflib), or ""."""
    import difflib

    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def program_class():
    """An ``invoke.Program`` whose command-line parse errors (an unknown option such as
    ``--jobz``, a missing value) exit 2, invalid input, as the contract says; invoke's own
    Program exits 1 for them. An unknown option or task name gets a did-you-mean from the
    task's options (or the task names). For an installed ``patchkit`` command built on invoke."""
    import re

    from invoke import Exit, Program
    from invoke.exceptions import ParseError

    class PatchkitProgram(Program):
        def _parse_error(self, exc: ParseError) -> Exit:
            message = one_line(str(exc))
            unknown = re.fullmatch(r"No idea what '(.+)' is!", message)
            if unknown:
                token = unknown.group(1)
                if token.startswith("-"):
                    context = getattr(exc, "context", None) or self.initial_context
                    flags = [*context.flags, *context.inverse_flags]
                    if context is not self.initial_context:
                        flags += [*self.initial_context.flags]
                    message += did_you_mean(token.split("=")[0], flags)
                else:
                    collection = getattr(self, "collection", None) or self.namespace
                    message += did_you_mean(token, collection.task_names if collection else ())
            return Exit(f"patchkit: {message}", EXIT_INVALID)

        def parse_core(self, argv):
            try:
                super().parse_core(argv)
            except ParseError as exc:
                raise self._parse_error(exc) from None

        def parse_tasks(self):
            try:
                super().parse_tasks()
            except ParseError as exc:
                raise self._parse_error(exc) from None

    return PatchkitProgram


def argument_parser(**kwargs):
    """An ``argparse.ArgumentParser`` for patchkit's ``python -m`` entry points whose
    "unrecognized arguments" error says which option was probably meant (exit 2, as argparse)."""
    import argparse

    class SuggestingParser(argparse.ArgumentParser):
        def error(self, message):
            if message.startswith("unrecognized arguments: "):
                import difflib

                options = sorted(set(_option_strings(self)))
                meant = []
                for token in message.split(": ", 1)[1].split():
                    close = difflib.get_close_matches(token.split("=")[0], options, n=1, cutoff=0.6)
                    if token.startswith("-") and close:
                        meant.append((close[0], token))
                if len(meant) == 1:
                    message += f" (did you mean {meant[0][0]}?)"
                elif meant:
                    message += f" (did you mean {', '.join(f'{m} for {t}' for m, t in meant)}?)"
            super().error(message)

    return SuggestingParser(**kwargs)


def _option_strings(parser) -> list[str]:
    """Every option string of ``parser`` and of its subcommands' parsers."""
    import argparse

    found = []
    for action in parser._actions:
        found += action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _option_strings(sub)
    return found
