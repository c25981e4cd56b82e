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
import os
import sys
from contextlib import contextmanager

from patchkit.errors import (EXIT_INTERRUPTED, EXIT_INVALID, EXIT_TERMINATED, PatchkitError,
                             Terminated)


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
    except BaseException as exc:  # noqa: B036 -- the boundary: everything else is re-raised
        if isinstance(exc, SystemExit):
            raise
        failure = failure_of(exc, interrupted)
        if failure is None:
            raise
        code, message = failure
        message = one_line(message)
        if json_op is not None:
            from patchkit.output import error_json

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
            with exit_boundary(prog, interrupted=interrupted,
                               json_op=label if kw.get("json") is True else None):
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

def run_patch_task(c, op: str, given: dict) -> None:
    """One ``patch.<op>`` run: settings, series and targets, the operation, the table or the
    JSON document; exits with the operation's code. ``given``: the task's parameters."""
    label = "apply --dry-run" if op == "apply" and given.get("dry_run") else op
    with exit_boundary("patchkit", json_op=label if given.get("json") else None,
                       interrupted="the target program cleans up after itself; "
                                   "patch.status says what each target is now"):
        from patchkit import ops
        from patchkit.output import render_json, render_text
        from patchkit.settings import PatchSettings

        settings = PatchSettings.from_invoke(c, op, given)
        opts = settings.options()
        series_dir, targets = resolve_targets(settings, opts)
        try:
            if settings.show_script:
                show_script(series_dir, targets, opts)
            result = getattr(ops, op)(series_dir, targets, opts)
        finally:
            for t in targets:       # inventory hosts come as Transports; ops leaves them open
                if not isinstance(t, str):
                    t.close()
        print(render_json(result) if settings.json else render_text(result))
    if result.exit_code:
        raise SystemExit(result.exit_code)


def resolve_targets(settings, opts) -> tuple:
    """(series, targets): --target / --inventory, else patchkit.targets / .inventory; k8s:
    targets become their pods. The series is a folder (a path or a shipped series' name,
    patchkit.locations.series_path), or with ``auto`` the one pinned to the targets' files: a
    ``PerHostSeries`` when the hosts of a fleet need different ones."""
    from patchkit.errors import InvalidInput
    from patchkit.locations import series_path
    from patchkit.transport.inventory import inventory_transports
    from patchkit.transport.k8s import expand_targets

    if not settings.series:
        raise InvalidInput("no --series given and no patchkit.series in invoke.yaml")
    series = settings.series if settings.series == "auto" else series_path(settings.series, opts.cwd)
    targets: list = list(settings.targets)
    try:
        if settings.inventory:
            path = os.path.join(opts.cwd, os.path.expanduser(settings.inventory))
            targets += inventory_transports(path, settings.limit, settings.root, cwd=opts.cwd,
                                            container=opts.container,
                                            exec_prefix=opts.exec_prefix, **opts.transport_options)
        if not targets:
            raise InvalidInput("no --target or --inventory given and none in invoke.yaml")
        # k8s:NS/SELECTOR:ROOT -> a Transport per running pod (kubectl get pods, here)
        targets = expand_targets(targets, container=opts.container, exec_prefix=opts.exec_prefix,
                                 **opts.transport_options)
        if series != "auto":
            return series, targets
        # one connection per target for the probe and the operation (ssh_persist 0 too):
        # the Transports made here serve both, and run_patch_task closes them
        from patchkit.transport import parse_target

        for i, t in enumerate(targets):
            if isinstance(t, str):
                targets[i] = parse_target(t, cwd=opts.cwd, container=opts.container,
                                          exec_prefix=opts.exec_prefix, **opts.transport_options)
        return auto_series(targets, opts, per_host=True), targets
    except BaseException:
        for t in targets:
            if not isinstance(t, str):
                t.close()
        raise


def auto_series(targets, opts=None, per_host: bool = False):
    """--series auto: the shipped series pinned to the targets' text (patchkit.engine.autoseries).

    ``per_host`` (the patch.* tasks): a fleet whose hosts need different series gets a
    ``PerHostSeries``; otherwise such a fleet is refused."""
    from patchkit.engine import autoseries

    kw = {}
    if opts is not None:
        kw = dict(cwd=opts.cwd, container=opts.container, exec_prefix=opts.exec_prefix,
                  **opts.transport_options)
    if per_host:
        from patchkit.ops import PerHostSeries

        dirs, said = autoseries.resolve_per_host(list(targets), **kw)
        series_dir = dirs[0] if len(set(dirs)) == 1 else PerHostSeries(dirs)
    else:
        series_dir, said = autoseries.resolve(list(targets), **kw)
    print(said, file=sys.stderr)
    return series_dir


def show_script(series_dir, targets, opts) -> None:
    from patchkit.engine.series import load_series
    from patchkit.engine.targetprog import build_program, compile_series
    from patchkit.ops import PerHostSeries
    from patchkit.transport import parse_target

    dirs = series_dir.series if isinstance(series_dir, PerHostSeries) else [series_dir] * len(targets)
    made: dict = {}
    for directory, spec in zip(dirs, targets):
        if directory not in made:
            made[directory] = compile_series(load_series(directory))
        t = spec if not isinstance(spec, str) else parse_target(
            spec, cwd=opts.cwd, container=opts.container, exec_prefix=opts.exec_prefix,
            **opts.transport_options)
        program = build_program(made[directory], "verify" if opts.dry_run else "apply", t.root,
                                layout=opts.layout)
        sys.stdout.write(f"# ===== program for {t.label} ({len(program)} bytes) =====\n")
        sys.stdout.write(program.decode("utf-8", "surrogateescape"))
        if isinstance(spec, str):
            t.close()


# -- invoke's own parse errors ------------------------------------------------------------------

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
