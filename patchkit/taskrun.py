"""The patch.* tasks' shared body: settings -> targets and series -> the fleet operation -> the
table or JSON document (above ops and output; the exit-code boundary itself is patchkit.boundary)."""

from __future__ import annotations

import os
import sys

from patchkit.boundary import exit_boundary
from patchkit.locations import AUTO


def run_patch_task(c, op: str, given: dict) -> None:
    """One ``patch.<op>`` run: settings, series and targets, the operation, the table or the
    JSON document; exits with the operation's code. ``given``: the task's parameters."""
    from patchkit.transport import interrupts

    label = "apply --dry-run" if op == "apply" and given.get("dry_run") else op
    with (
        exit_boundary(
            "patchkit",
            json_op=label if given.get("json") else None,
            interrupted="nothing was started on any target",
        ),
        interrupts.deferred(),  # once a target program runs, Ctrl-C is passed to it and waited for
    ):
        from patchkit import ops
        from patchkit.ops import options_from
        from patchkit.output import render_json, render_text
        from patchkit.settings import PatchSettings

        settings = PatchSettings.from_invoke(c, op, given)
        opts = options_from(settings)
        series_dir, targets = series_and_targets(settings, opts)
        if op == "apply" and settings.mode == "import":
            run_import_apply(settings, series_dir, targets)
            return
        try:
            if settings.show_script:
                show_script(series_dir, targets, opts)
            result = getattr(ops, op)(series_dir, targets, opts)
            suggest_series(result, series_dir, targets, opts)
        finally:
            for t in targets:  # inventory hosts come as Transports; ops leaves them open
                if not isinstance(t, str):
                    t.close()
        sig = interrupts.requested()
        if sig is not None and result.exit_code:
            # the programs had ended on their own (refused) when the interrupt came: said, and
            # the interrupt's exit code
            result.exit_code = interrupts.exit_code(sig)
        print(render_json(result) if settings.json else render_text(result))
        if sig is not None:
            said = "nothing was cut short" if result.exit_code == 0 else "the table says where each target is"
            print(f"patchkit: interrupted after the targets had answered; {said}", file=sys.stderr)
    if result.exit_code:
        raise SystemExit(result.exit_code)


def run_import_apply(settings, series_dir, targets) -> None:
    """patch.apply --mode import: check the one local target (read only) and write the hook
    folder (patchkit.engine.importmode); print the PYTHONPATH to give the server. --dry-run:
    the check only, no folder."""
    import json

    from patchkit.engine.importmode import import_env, patched_texts, write_hook
    from patchkit.errors import InvalidInput

    for t in targets:
        if not isinstance(t, str):
            t.close()
    if len(targets) != 1 or not isinstance(targets[0], str) or "://" in targets[0]:
        raise InvalidInput("--mode import: one local directory target (the server's own host)")
    if not isinstance(series_dir, (str, os.PathLike)):
        raise InvalidInput("--mode import: one series for the one target")
    root = os.path.join(settings.cwd, targets[0])
    if settings.show_script:
        raise InvalidInput("--mode import runs no shell program on the target: no --show-script")
    if settings.dry_run:
        files = patched_texts(str(series_dir), root, settings.layout)
        doc = {"mode": "import", "dry_run": True, "target": root, "patched_in_memory": sorted(files)}
        text = f"import mode (dry run): {root}: {len(files)} files match the pin and patch in memory; nothing written"
    else:
        hook_dir = os.path.join(settings.cwd, settings.hook_dir) if settings.hook_dir else None
        hook = write_hook(str(series_dir), root, hook_dir, settings.layout)
        env = import_env(hook, {})
        doc = {**hook.as_dict(), "env": env}
        text = "\n".join(
            [
                f"import mode: {hook.series} checked against {root} ({len(hook.files)} files); "
                "nothing written in the target",
                f"hook: {hook.path} (delete it, or start without it, to undo)",
                "give the server:",
                *(f"  {k}={v}" for k, v in env.items()),
            ]
        )
    print(json.dumps(doc, indent=2, sort_keys=True) if settings.json else text)


def series_and_targets(settings, opts) -> tuple:
    """(series, targets): --target / --inventory, else patchkit.targets / .inventory; k8s:
    targets become their pods. The series is a folder (a path or a shipped series' name,
    patchkit.locations.series_arg), or with ``auto`` the one pinned to the targets' files: a
    ``PerHostSeries`` when the hosts of a fleet need different ones."""
    from patchkit.errors import InvalidInput
    from patchkit.locations import series_arg
    from patchkit.transport import resolve_targets

    if not settings.series:
        raise InvalidInput(f"no --series given and no patchkit.series in {settings.config_where}")
    series = series_arg(settings.series, "the patch task", cwd=opts.cwd, auto=True)
    if not settings.targets and not settings.inventory:
        raise InvalidInput(
            "no --target or --inventory given and no patchkit.targets or patchkit.inventory "
            f"in {settings.config_where}"
        )
    # the one resolution (patchkit.transport.resolve_targets): inventory hosts, k8s:NS/SELECTOR:ROOT
    # -> a Transport per running pod (kubectl get pods, here); with --series auto every target
    # opened here: one connection per target for the probe and the operation (ssh_persist 0
    # too), and run_patch_task closes them
    targets = resolve_targets(
        settings.targets,
        inventory=settings.inventory,
        limit=settings.limit,
        root=settings.root,
        open_all=series == AUTO,
        cwd=opts.cwd,
        container=opts.container,
        exec_prefix=opts.exec_prefix,
        **opts.transport_options,
    )
    if not targets:
        raise InvalidInput(f"no targets: the inventory {settings.inventory} has none")
    if series != AUTO:
        return series, targets
    try:
        return auto_series(targets, opts, per_host=True), targets
    except BaseException:
        for t in targets:
            if not isinstance(t, str):
                t.close()
        raise


def suggest_series(result, series_dir, targets, opts) -> None:
    """A host holding none of the given series' pinned files (its layout ``none``: a transformers
    tree given the default sglang series) has its message end in the way out: ``--series auto``,
    naming the shipped series pinned to exactly that host's files where one is (a second read
    of that host, only on this failure)."""
    from patchkit.engine import autoseries

    if not isinstance(series_dir, str) or not any(h.layout == "none" for h in result.hosts):
        return  # --series auto chose per host: each host's series matched it
    specs = targets if len(targets) == len(result.hosts) else [None] * len(result.hosts)
    for spec, host in zip(specs, result.hosts):
        if host.layout != "none":
            continue
        found = None if spec is None else autoseries.pinned_to(spec, **_read_options(opts))
        hint = (
            f"the shipped {found} is pinned to exactly these files: pass --series auto (or --series {found})"
            if found
            else "--series auto picks the shipped series pinned to a target's files (patch.series lists them)"
        )
        at = next((i for i, m in enumerate(host.messages) if "none of the pinned files" in m), None)
        if at is None:
            host.messages.append(hint)
        else:
            host.messages[at] += f"; {hint}"


def _read_options(opts) -> dict:
    """What reading a target for --series auto takes: the operation's own target options, and
    its --timeout (a host that never answers fails as soon as the operation would)."""
    return dict(
        cwd=opts.cwd,
        container=opts.container,
        exec_prefix=opts.exec_prefix,
        timeout=opts.timeout,
        **opts.transport_options,
    )


def auto_series(targets, opts=None, per_host: bool = False):
    """--series auto: the shipped series pinned to the targets' text (patchkit.engine.autoseries).

    ``per_host`` (the patch.* tasks): a fleet whose hosts need different series gets a
    ``PerHostSeries``; otherwise such a fleet is refused."""
    from patchkit.engine import autoseries

    kw = {} if opts is None else _read_options(opts)
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
        t = (
            spec
            if not isinstance(spec, str)
            else parse_target(
                spec,
                cwd=opts.cwd,
                container=opts.container,
                exec_prefix=opts.exec_prefix,
                **opts.transport_options,
            )
        )
        program = build_program(
            made[directory], "verify" if opts.dry_run else "apply", t.root, layout=opts.layout
        )
        sys.stdout.write(f"# ===== program for {t.label} ({len(program)} bytes) =====\n")
        sys.stdout.write(program.decode("utf-8", "surrogateescape"))
        if isinstance(spec, str):
            t.close()


# -- invoke's own parse errors ------------------------------------------------------------------
