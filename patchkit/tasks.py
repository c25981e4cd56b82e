"""patchkit's command line: `invoke patch.apply --series DIR --target T` and friends.

Thin by design: each task resolves its arguments against invoke.yaml, calls one patchkit function
and maps expected failures to the contract's exit codes (0 done, 1 refused, 2 invalid input).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path

from invoke import Collection

from patchkit.boundary import task as bounded_task
from patchkit.errors import InvalidInput
from patchkit.locations import AUTO, series_arg
from patchkit.settings import (
    PATCHKIT_DEFAULTS,
    REMOTE_FALLBACKS,
    PatchSettings,
    checked,
    config_value,
    configured,
    given_value,
    need_inventory,
    offered,
    output_dir,
    owners,
    resolve,
    resolve_checked,
    resolve_front,
    say_notes,
    task_help,
)
from patchkit.taskrun import auto_series as _auto_series, run_patch_task

# the target options' help texts (patch.check ... patch.unlock share them): the option table
TARGET_HELP = task_help("patch.check")


def _cfg(c, key, default=None):
    return config_value(c.config, key, default)


def _config_checked(c) -> None:
    """Before every task: unknown sections and settings in any config file are refused."""
    if hasattr(c, "config"):
        say_notes(c.config)


def task(*args, **kwargs):
    """patchkit.boundary.task, each task checking the config files first (_config_checked)."""
    return bounded_task(*args, before=_config_checked, **kwargs)


# check, verify, apply, revert, status, unlock take the same target options; invoke reads a task's
# options from its signature, so the six signatures are built here from the option table's rows
# for each task (patchkit.settings: PATCH_TASKS). The options are checked and merged with
# invoke.yaml once (patchkit.settings.PatchSettings), and patchkit.taskrun.run_patch_task runs the
# operation.


def row_parameters(front: str) -> dict[str, object]:
    """{parameter: its default} of a task whose options are its rows, in table order: a flag
    its row's default (invoke passes it when the flag is not given), anything else None (not
    given: the config, then the row's default; patchkit.settings.resolve)."""
    return {name: o.default if isinstance(o.default, bool) else None for name, o in offered(front).items()}


def with_row_signature(front: str, body):
    """``body(c, **given)`` with the signature invoke reads its options from: ``front``'s rows
    (row_parameters). A row added to the table is an option of the task, nothing else to edit."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("c", kind)] + [
        inspect.Parameter(n, kind, default=d) for n, d in row_parameters(front).items()
    ]
    setattr(body, "__signature__", inspect.Signature(params))  # noqa: B010  (mypy: no such attribute)
    return body


def _patch_task(op: str, doc: str):
    """The ``patch.<op>`` task: its rows of the option table as its options, ``doc`` as its help."""
    options = row_parameters(f"patch.{op}")

    def body(c, **given):
        run_patch_task(c, op, {**options, **given})

    body.__name__ = body.__qualname__ = op
    body.__doc__ = doc
    return task(auto_shortflags=False, iterable=["target"], help=task_help(f"patch.{op}"))(
        with_row_signature(f"patch.{op}", body)
    )


check = _patch_task("check", "Pin only: commit/version, sha256 and wc -l of every pinned file.")
verify = _patch_task(
    "verify", "Dry run: pin, every hunk's lines at their numbers, sed result checked; writes nothing."
)
apply = _patch_task("apply", "Apply the series (all files, all hosts, or nothing); idempotent.")
revert = _patch_task(
    "revert", "Restore the byte-identical originals saved by apply; leave no patchkit trace."
)
status = _patch_task(
    "status", "Say what each target is: pristine | applied | partial | modified | drifted (and locks)."
)
unlock = _patch_task(
    "unlock", "Remove a lock by hand (one patchkit cannot prove dead: another host; reports who held it)."
)


def _abspath(p):
    return os.path.abspath(os.path.expanduser(p)) if p else None


def _folder(front: str, option: str, value) -> str:
    """A folder option the task cannot go without (invoke makes it positional): its row's check."""
    path = checked(front, option, value)
    if path is None:
        raise InvalidInput(f"--{option.replace('_', '-')}: required")
    return path


def _series(c, series, task: str):
    """--series, else patchkit.series (its row: an empty one refused): a shipped series' name or a
    folder, as an absolute path (patchkit.locations.series_arg; ``auto`` refused: no target)."""
    given = resolve(offered("patch.edit")["series"], series, c.config)
    if not given:
        raise InvalidInput(f"{task} needs --series NAME_OR_DIR (or patchkit.series in invoke.yaml)")
    return series_arg(given, task)


def _pristine(series, pristine):
    from pathlib import Path

    from patchkit import upstream as up

    if pristine:
        return Path(_folder("patch.edit", "pristine", pristine))
    return up.fetch_tree(series_dir=Path(series))[0]


@task(auto_shortflags=False, help=task_help("patch.edit"))
def edit(c, dest, series=None, upto=None, pristine=None, layout="checkout"):
    """Write the pinned tree with the series applied, for editing new timers into it."""
    from pathlib import Path

    from patchkit.author import authoring

    series = _series(c, series, "patch.edit")
    dest = checked("patch.edit", "dest", dest)
    checked("patch.edit", "layout", layout)
    out = authoring.prepare_edit_tree(
        Path(series), _pristine(series, pristine), Path(_abspath(dest)), upto=upto, layout=layout
    )
    print(f"editable tree: {out}")


@task(auto_shortflags=False, iterable=["new_file"], help=task_help("patch.new"))
def new(c, name, edited, series=None, pristine=None, header=None, new_file=None):
    """Append a new patch to the series: the edited tree minus the current series."""
    from pathlib import Path

    from patchkit.author import authoring

    series = _series(c, series, "patch.new")
    new_file = checked("patch.new", "new_file", new_file)
    out = authoring.new_patch(
        Path(series),
        name,
        Path(_folder("patch.new", "edited", edited)),
        _pristine(series, pristine),
        header=header,
        new_files=list(new_file or []),
    )
    print(f"wrote {out} and added it to {series}/series")


@task(auto_shortflags=False, help=task_help("patch.refresh"))
def refresh(c, edited, series=None, pristine=None, patch=None):
    """Rewrite one patch of the series from the edited tree (header and pin kept)."""
    from pathlib import Path

    from patchkit.author import authoring

    series = _series(c, series, "patch.refresh")
    path, changed = authoring.refresh(
        Path(series),
        Path(_folder("patch.refresh", "edited", edited)),
        _pristine(series, pristine),
        patch=patch,
    )
    print(f"{path}: {'rewritten' if changed else 'unchanged (same bytes)'}")


@task(
    name="gen-runtime",
    auto_shortflags=False,
    help=task_help("patch.gen-runtime"),
)
def gen_runtime(c, series=None, check=False, all_=False):
    """Regenerate the series' phase_timer.py new-file patch from patchkit/timing/."""
    from pathlib import Path

    from patchkit.author import authoring
    from patchkit.engine import runtime_patch
    from patchkit.locations import series_root, shipped_names

    if all_ and series:
        raise InvalidInput("patch.gen-runtime: --all or --series, not both")
    folders = (
        [series_root() / n for n in shipped_names()]
        if all_
        else [Path(_series(c, series, "patch.gen-runtime"))]
    )
    differs = False
    for folder in folders:
        for name, changed in authoring.regenerate_runtime_patches(folder, write=not check):
            where = f"{folder.name}/" if all_ else ""
            said = "differs" if changed and check else "rewritten" if changed else "up to date"
            if not changed and runtime_patch.is_rendered(str(folder), name):
                said = f"rendered from patchkit/timing on every read ({name}{runtime_patch.MARKER_SUFFIX})"
            print(f"{where}{name}: {said}")
            differs |= changed
    if check and differs:
        raise SystemExit(1)


@task(
    name="export",
    auto_shortflags=False,
    help=task_help("patch.export"),
)
def export(c, series=None, out=None, all_=False):
    """Write a series folder as users get it: every file, the runtime patch rendered in place of its marker."""
    from pathlib import Path

    from patchkit.author import authoring
    from patchkit.locations import series_root, shipped_names

    if all_ and series:
        raise InvalidInput("patch.export: --all or --series, not both")
    out_text = checked("patch.export", "out", out)
    if not out_text:
        raise InvalidInput("patch.export needs --out DIR")
    out_root = Path(os.path.abspath(os.path.expanduser(out_text)))
    if all_:
        folders = [series_root() / n for n in shipped_names()]
    else:
        given = resolve(offered("patch.export")["series"], series, c.config)
        if not given:
            raise InvalidInput("patch.export needs --series DIR_OR_NAME (or --all)")
        folders = [Path(series_arg(given, "patch.export"))]
    for folder in folders:
        dest, count = authoring.export_series(folder, out_root)
        print(f"wrote {dest} ({count} files)")


@task(
    name="gen-config",
    auto_shortflags=False,
    help=task_help("patch.gen-config"),
)
def gen_config(c, file=None, check=False):
    """Regenerate invoke.yaml's commented defaults from the option table (patchkit/settings.py)."""
    from patchkit.locations import checkout
    from patchkit.settings import example_config

    root = checkout()
    if file is not None:
        path = Path(resolve(offered("patch.gen-config")["file"], file, cwd=os.getcwd()) or "")
    elif root is not None:
        path = root / "invoke.yaml"
    else:
        raise InvalidInput("patch.gen-config: no checkout of patchkit here; give --file FILE")
    old = path.read_text(encoding="utf-8")
    new = example_config(old, str(path))
    if new != old and not check:
        path.write_text(new, encoding="utf-8")
    print(f"{path.name}: {'up to date' if new == old else 'differs' if check else 'rewritten'}")
    if check and new != old:
        raise SystemExit(1)


@task(
    name="fetch",
    auto_shortflags=False,
    iterable=["path"],
    help=task_help("upstream.fetch"),
)
def upstream_fetch(
    c,
    series=None,
    name=None,
    version=None,
    path=None,
    upstream=None,
    rev=None,
    layout="checkout",
    dest=None,
    trust_new=False,
):
    """Fetch pristine upstream files (PyPI wheel by version, or git clone by rev) into .cache/."""
    from pathlib import Path

    from patchkit import upstream as up

    checked("upstream.fetch", "layout", layout)
    upstream = checked("upstream.fetch", "upstream", upstream)
    if dest is not None and os.path.exists(dest) and not os.path.isdir(dest):
        raise InvalidInput(f"--dest {dest!r}: a file, not a folder")
    tree, commit = up.fetch_tree(
        name,
        version,
        list(path or []) or None,
        series_dir=Path(series_arg(series, "upstream.fetch")) if series else None,
        clone=Path(_abspath(upstream)) if upstream else None,
        rev=rev,
        layout=layout,
        dest=Path(_abspath(dest)) if dest else None,
        trust_new=trust_new,
    )
    print(f"tree: {tree}" + (f"\ncommit: {commit}" if commit else ""))


@task(
    name="pin",
    auto_shortflags=False,
    iterable=["path"],
    help=task_help("upstream.pin"),
)
def upstream_pin(c, series, tree, path=None, name=None, version=None, commit=None, package_prefix=None):
    """Write or update pin.toml (sha256 and wc -l per file, version/commit) from a pristine tree."""
    from pathlib import Path

    from patchkit import upstream as up

    package_prefix = checked("upstream.pin", "package_prefix", package_prefix)
    series = series_arg(series, "upstream.pin")
    pin = up.pin_series(
        Path(series),
        Path(_folder("upstream.pin", "tree", tree)),
        list(path or []) or None,
        name=name,
        version=version,
        commit=commit,
        package_prefix=package_prefix,
    )
    print(f"wrote {Path(series) / 'pin.toml'} ({len(pin.files)} files)")


@task(name="series", auto_shortflags=False, help=task_help("patch.series"))
def list_series(c, json=False):
    """List the shipped series: each one's upstream, releases and how it is proven."""
    from patchkit.catalog import render_json, render_text, shipped_series

    rows = shipped_series()
    sys.stdout.write(render_json(rows) if json else render_text(rows))


patch = Collection(
    "patch", check, verify, apply, revert, status, unlock, edit, new, refresh, gen_runtime, export, gen_config
)
patch.add_task(list_series, "series")
profile = Collection("profile")
upstream = Collection("upstream")
upstream.add_task(upstream_fetch, "fetch")
upstream.add_task(upstream_pin, "pin")

ns = Collection(patch, profile, upstream)
ns.configure({"patchkit": dict(PATCHKIT_DEFAULTS)})


# ----------------------------------------------------------------------------- profile.* (default target)
# The embedded default: transformers 5.17.0 assisted generation on small random Llama models,
# installed into .work/tf-site, patched with patches/transformers-v5.17.0, always reverted.
# Implementation: patchkit.profile (run_default, run_sweep); also `python -m patchkit.profile`.

# the options' help texts, defaults and checks: patchkit.settings' option table


def _profile(c, name: str, given=None, front: str = "profile.run"):
    """One option of the profile tasks through its row (patchkit.settings.resolve): --name,
    else patchkit.profile.<key> (or its old name), else the row's default; checked."""
    return resolve(offered(front)[name], given, c.config)


def _profile_kwargs(c, out, size, site, series, timer, device, seed, timeout, wheelhouse, no_chart):
    kw = dict(
        size=_profile(c, "size", size),
        timer_mode=_profile(c, "timer", timer),
        device=_profile(c, "device", device),
        seed=_profile(c, "seed", seed),
        timeout=_profile(c, "timeout", timeout),
        wheelhouse=_profile(c, "wheelhouse", wheelhouse),
        chart=not no_chart,
    )
    for key, value in (("site", site), ("series_dir", series)):
        # patchkit.profile.series (documented in invoke.yaml) feeds run_default's series_dir
        name = key.split("_")[0]
        value = _profile(c, name, value)
        if value and key == "series_dir":
            value = series_arg(value, "profile.run", auto=True)
        if value == AUTO and key == "series_dir":
            if kw.get("site"):  # the embedded default's own series otherwise (site not built yet)
                kw[key] = _auto_series([kw["site"]])
        elif value:
            kw[key] = value if key == "series_dir" else _abspath(value)
    return output_dir(_profile(c, "out", out), "out"), kw


PROFILE_TASK = dict(prog="profile", interrupted="the tree was reverted")


def _warmup(c, warmup) -> bool:
    """--warmup/--no-warmup, else patchkit.profile.warmup, else on (its row: the boolean rule)."""
    return bool(_profile(c, "warmup", warmup))


def _repeat(c, repeat):
    """--repeat N, else patchkit.profile.repeat (its row's check; None: the default)."""
    return _profile(c, "repeat", repeat, "profile.sweep")


@task(
    name="run",
    auto_shortflags=False,
    **PROFILE_TASK,
    help=task_help("profile.run"),
)
def profile_run(
    c,
    out=None,
    size=None,
    site=None,
    series=None,
    timer=None,
    device=None,
    seed=None,
    timeout=None,
    wheelhouse=None,
    no_chart=False,
    num_assistant_tokens=None,
    confidence=None,
    sample=None,
    warmup=True,
    mode=None,
):
    """Profile the embedded default: apply, run assisted generation, revert, report."""
    from patchkit.extras import require
    from patchkit.profile.local_run import run_default

    require("profile", "profile.run")  # before --out is made and the site is touched
    try:
        sample = _profile(c, "sample", sample)
    except InvalidInput as exc:
        raise InvalidInput(f"profile.run {exc.message}") from None
    warmup = _warmup(c, warmup)  # checked before --out is made
    out, kw = _profile_kwargs(c, out, size, site, series, timer, device, seed, timeout, wheelhouse, no_chart)
    if num_assistant_tokens is not None:
        kw["num_assistant_tokens"] = checked("profile.run", "num_assistant_tokens", num_assistant_tokens)
    if confidence is not None:
        kw["assistant_confidence_threshold"] = checked("profile.run", "confidence", confidence)
    run_default(out, timer_sample=sample, warmup=warmup, mode=_profile(c, "mode", mode), **kw)


@task(
    name="sweep",
    auto_shortflags=False,
    **PROFILE_TASK,
    help=task_help("profile.sweep"),
)
def profile_sweep(
    c,
    matrix=None,
    out=None,
    size=None,
    site=None,
    series=None,
    timer=None,
    device=None,
    seed=None,
    timeout=None,
    wheelhouse=None,
    no_chart=False,
    warmup=True,
    repeat=None,
):
    """One profile run per matrix point plus the baseline; table with the best point marked."""
    from patchkit.extras import require
    from patchkit.profile.local_sweep import run_sweep

    require("profile", "profile.sweep")  # before --out is made and the site is touched
    repeat, warmup = _repeat(c, repeat), _warmup(c, warmup)  # checked before --out is made
    out, kw = _profile_kwargs(c, out, size, site, series, timer, device, seed, timeout, wheelhouse, no_chart)
    matrix = _profile(c, "matrix", matrix, "profile.sweep")
    run_sweep(out, matrix=matrix, repeat=repeat, warmup=warmup, **kw)


profile.add_task(profile_run, "run")
profile.add_task(profile_sweep, "sweep")
# ----------------------------------------------------------------------------- end of profile.*


# ----------------------------------------------------------------------------- patch.rebase, patch.diff
# Implementation: patchkit.author.rebase (relocation: patchkit.author.relocate, report: patchkit.author.rebase_report)
# and patchkit.author.seriesdiff.


@task(
    name="rebase",
    auto_shortflags=False,
    help=task_help("patch.rebase"),
)
def patch_rebase(
    c,
    series=None,
    onto=None,
    upstream=None,
    out=None,
    context_trim=False,
    resume=False,
    version=None,
    wheelhouse=None,
    trust_new=False,
    merge=True,
    onto_target=None,
    layout=None,
    container=None,
    exec_=None,
    ssh_config=None,
    timeout=None,
):
    """Rebase a series onto another release (exact, then checked 3-way merge); exit 1 if a hunk needs attention."""
    from patchkit.author.rebase import rebase
    from patchkit.ops import options_from  # the fleet layer: imported when a task needs it

    # the target options are checked whether or not --onto-target uses them
    opts = options_from(
        PatchSettings.from_invoke(
            c,
            "rebase",
            dict(
                series=series,
                target=[onto_target] if onto_target else [],
                layout=layout,
                container=container,
                exec_=exec_,
                ssh_config=ssh_config,
                timeout=timeout,
            ),
        )
    )
    series = series or _cfg(c, "series")
    upstream = checked("patch.rebase", "upstream", upstream)
    wheelhouse = resolve(offered("patch.rebase")["wheelhouse"], wheelhouse, c.config)
    _check_rebase_out(out, resume)
    if not series or bool(onto) == bool(onto_target):
        raise InvalidInput(
            "patch.rebase needs --series DIR and one of --onto VERSION_OR_COMMIT or --onto-target T"
        )
    if onto_target and (not out or upstream):
        raise InvalidInput("patch.rebase --onto-target needs --out DIR (and takes no --upstream)")
    path = lambda p: os.path.abspath(os.path.expanduser(p)) if p else None  # noqa: E731
    series = series_arg(series, "patch.rebase")  # given: checked above
    new_source = None
    if onto_target:
        new_source = _target_source(series, onto_target, opts)
        onto = onto_target
    result = rebase(
        series,
        onto,
        upstream_clone=path(upstream),
        out_dir=path(out),
        context_trim=context_trim,
        resume=resume,
        version=version,
        wheelhouse=path(wheelhouse),
        trust_new=trust_new,
        merge=merge,
        new_source=new_source,
    )
    _print_rebase(result)
    if result.exit_code:
        raise SystemExit(result.exit_code)


def _check_rebase_out(out, resume) -> None:
    """--out must be new or empty unless --resume; said before any wheel is fetched."""
    if out is None:
        return
    where = os.path.expanduser(checked("patch.rebase", "out", out))
    if not resume and os.path.isdir(where) and os.listdir(where):
        raise InvalidInput(
            f"--out {out!r} already exists; remove it, pass another --out, "
            "or --resume after editing its patches"
        )


def _target_source(series: str, onto_target: str, opts):
    """--onto-target: the new release's files as the target holds them."""
    from patchkit.author.targetread import target_source
    from patchkit.engine.series import load_series

    return target_source(
        load_series(series),
        onto_target,
        cwd=opts.cwd,
        container=opts.container,
        exec_prefix=opts.exec_prefix,
        layout=opts.layout,
        timeout=opts.timeout,
        transport_options=opts.transport_options,
    )


def _print_rebase(result) -> None:
    """The rebase's summary, the hunks needing attention, the warnings and where REBASE.md is."""
    print(result.summary())
    for h in result.attention:
        print(f"  needs attention: {h.patch} hunk {h.number} {h.old_header} ({h.path}): {h.reason}")
    for h in result.hunks:
        for w in h.warnings:
            print(f"  warning: {h.patch} hunk {h.number}: {w}")
    if result.written:
        print(f"report: {result.out_dir / 'REBASE.md'}")


@task(
    name="diff",
    auto_shortflags=False,
    help=task_help("patch.diff"),
)
def patch_diff(c, from_=None, to=None):
    """What changed between two series (pin, order, headers, hunk placement and content)."""
    from patchkit.author.seriesdiff import series_diff

    if not from_ or not to:
        raise InvalidInput("patch.diff needs --from DIR and --to DIR")
    older = series_arg(from_, "patch.diff", option="--from")
    sys.stdout.write(series_diff(older, series_arg(to, "patch.diff", option="--to")))


patch.add_task(patch_rebase, "rebase")
patch.add_task(patch_diff, "diff")
# ----------------------------------------------------------------------------- end of patch.rebase, patch.diff


# ----------------------------------------------------------------------------- profile.remote
# The remote SGLang run: settings in invoke.yaml under patchkit.profile.remote (documented there;
# patchkit.series/targets/layout/ssh_config/ssh_options are its defaults); an option beats them.
# Implementation: patchkit.profile.remote (run_remote); also `python -m patchkit.profile.remote`.


def _profile_remote(c, **params):
    """Profile SGLang on SSH targets: apply, serve, benchmark, stop, fetch, revert, report."""
    params = {**row_parameters("profile.remote"), **params}  # each an option of its row
    target, env, out, matrix = params["target"], params["env"], params["out"], params["matrix"]
    from_prediction, top, limit, root = (
        params["from_prediction"],
        params["top"],
        params["limit"],
        params["root"],
    )
    from patchkit.profile.remote import RemoteConfig, run_remote
    from patchkit.profile.remote.sweep import run_remote_sweep

    settings = dict((_cfg(c, "profile", {}) or {}).get("remote") or {})
    own_targets = settings.get("targets") not in (None, "", []) or bool(target)
    for key, fallback in REMOTE_FALLBACKS.items():  # series, targets, layout, ssh_*, ...: patchkit.*
        if settings.get(key) in (None, "", []) and _cfg(c, fallback) not in (None, "", []):
            if key == "inventory" and own_targets:  # as for the patch tasks: with targets of its own
                continue  # (profile.remote.targets or --target), patchkit.inventory is not read
            settings[key] = _cfg(c, fallback)
    rows = offered("profile.remote")
    resume = resolve(rows["resume"], params["resume"])  # a sweep's folder (checked before anything)
    given: dict = {}
    for name, row in rows.items():  # each option given goes through its row (the message names it)
        if row.key is None or name == "env" or not given_value(row, params[name]):
            continue
        try:
            given[row.key.rpartition(".")[2]] = resolve(row, params[name])
        except InvalidInput as exc:
            raise InvalidInput(f"profile.remote {exc.message}" if name == "sample" else exc.message) from None
    if params["no_chart"]:
        given["chart"] = False
    if from_prediction is not None or top is not None:
        from patchkit.report.predict import load_prediction, matrix_with_steps, promising

        if not from_prediction:
            raise InvalidInput(
                "--top needs --from-prediction RUN (a profile.predict run folder or predict.json)"
            )
        pred = load_prediction(_abspath(resolve(rows["from_prediction"], from_prediction)))
        steps = promising(pred, resolve(rows["top"], top))
        given["matrix"] = matrix_with_steps(matrix, steps)
        print(
            f"--from-prediction: num-steps {', '.join(map(str, steps))} (the predicted best and the profiled point)"
        )
    settings.update(given)
    need_inventory(settings.get("inventory"), limit, root)  # refused as by the patch tasks
    # phases.png; before --out is made and a target is touched (chart: the row's boolean rule)
    chart = owners()["profile.remote.chart"]
    if resolve_checked(chart, settings.get("chart", chart.default), "profile.remote: chart"):
        from patchkit.extras import require

        require("report", "profile.remote", instead="or give --no-chart")
    if out is not None:
        settings["out"] = output_dir(out, "out")
    if settings.get("series"):
        settings["series"] = series_arg(str(settings["series"]), "profile.remote", auto=True)
    auto = settings.get("series") == AUTO and (settings.get("targets") or settings.get("inventory"))
    if auto:
        settings.pop("series")  # chosen below, from the targets (every other setting checked first)
    cfg = RemoteConfig.from_mapping(settings, cwd=os.getcwd(), extra_env=list(env or []))
    if auto:  # the targets as the run resolves them (patchkit.transport.resolve_targets)
        targets = cfg.open_targets(os.getcwd())
        try:
            cfg.series = str(_auto_series(targets))
        finally:
            for t in targets:
                t.close()
    if resume is not None and not cfg.matrix:
        raise InvalidInput("profile.remote --resume is for a sweep: give the sweep's --matrix too")
    if cfg.matrix:
        run_remote_sweep(cfg, resume=resume)
    else:
        run_remote(cfg)


profile_remote = task(
    name="remote",
    auto_shortflags=False,
    iterable=["target", "env"],
    prog="profile",
    interrupted="servers stopped, targets reverted",
    help=task_help("profile.remote"),
)(with_row_signature("profile.remote", _profile_remote))
profile.add_task(profile_remote, "remote")
# ----------------------------------------------------------------------------- end of profile.remote


# ----------------------------------------------------------------------------- profile.collect, profile.report
# Reports for a server you started yourself (with PATCHKIT_TIMER_DIR set).
# Implementation: patchkit.profile.collect (fetch as profile.remote does; patchkit.report).

PROFILE_COLLECT = dict(prog="profile")


@task(
    name="collect",
    auto_shortflags=False,
    iterable=["target"],
    **PROFILE_COLLECT,
    help=task_help("profile.collect"),
)
def profile_collect(
    c,
    target=None,
    from_=None,
    out=None,
    max_mb=None,
    python=None,
    container=None,
    exec_=None,
    ssh_config=None,
    ssh_persist=None,
    timeout=None,
):
    """Fetch every rank's timing files (and window.json) from targets, one size-capped stream each."""
    from patchkit.profile.collect import FetchSettings, collect
    from patchkit.transport import parse_target

    if not target or not out:
        raise InvalidInput("profile.collect needs --target T (repeatable) and --out DIR")
    from patchkit.ops import options_from  # the fleet layer: imported when a task needs it

    # the target options are checked and merged with invoke.yaml as for the patch.* tasks
    opts = options_from(
        PatchSettings.from_invoke(
            c,
            "collect",
            dict(
                target=list(target),
                container=container,
                exec_=exec_,
                ssh_config=ssh_config,
                ssh_persist=ssh_persist,
            ),
        )
    )

    def read(option: str, value):
        """--option, else the patchkit.profile.remote key it reads (checked by that key's own
        row, as profile.remote checks it), else the key's default."""
        row = offered("profile.collect")[option]
        if given_value(row, value) or row.key is None:
            return resolve(row, value)
        owner = owners()[row.key]
        value = configured(c.config, row.key)[0]
        return resolve(owner) if value is None else resolve_checked(owner, value, f"patchkit.{row.key}")

    settings = FetchSettings(
        python=read("python", python),
        max_fetch_mb=read("max_mb", max_mb),
        step_timeout_s=read("timeout", timeout),
    )
    from_ = checked("profile.collect", "from_", from_)
    transports: list = []
    try:
        for spec in target:
            transports.append(
                parse_target(
                    spec,
                    cwd=opts.cwd,
                    container=opts.container,
                    exec_prefix=opts.exec_prefix,
                    **opts.transport_options,
                )
            )
        got = collect(transports, _abspath(checked("profile.collect", "out", out)), from_, settings)
    finally:
        for t in transports:
            t.close()
    for label, where, count in got.per_target:
        print(f"{label}: {count} timing file(s) from {where}")
    print(
        f"collected {len(got.files)} timing file(s), {got.bytes} bytes, into {got.out}"
        + (" (with window.json)" if got.window else "")
    )


@task(
    name="report",
    auto_shortflags=False,
    prog="profile",
    help=task_help("profile.report"),
)
def profile_report(c, timing=None, out=None, bench=None, no_chart=False):
    """Table, trace, chart and summary from any timing folder (optionally a benchmark's output)."""
    from patchkit.profile.collect import report
    from patchkit.report import render_table

    if not timing or not out:
        raise InvalidInput("profile.report needs --timing DIR and --out DIR")
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    summary = report(_abspath(timing), _abspath(out), _abspath(bench), chart=not no_chart, say=say)
    print(render_table(summary))
    print(f"report: {_abspath(out)} ({', '.join(sorted(summary.files.values()))})")


@task(
    name="predict",
    auto_shortflags=False,
    prog="profile",
    positional=["run"],
    iterable=["pool"],
    help=task_help("profile.predict"),
)
def profile_predict(c, run=None, out=None, bootstrap=None, verify_us_per_token=None, spread=None, pool=None):
    """What-if: the tokens/s of num-steps 1..N, predicted from a run profiled at N.

    With --pool, the median over several runs of that point."""
    from patchkit.extras import PAGE_NEEDS, missing
    from patchkit.profile.remote.spread import cache_path, plan_lines, prediction_plan, spread_for_command
    from patchkit.report.predict import (
        BOOTSTRAP,
        pool as pool_predictions,
        predict_run,
        render,
        with_start_spread,
    )

    if not run:
        raise InvalidInput("profile.predict needs a run folder: invoke profile.predict RUN")
    options = resolve_front("profile.predict", locals())
    resamples = BOOTSTRAP if options["bootstrap"] is None else options["bootstrap"]
    slope, given = options["verify_us_per_token"], options["spread"]
    given = None if given is None else given / 100.0
    pred = predict_run(_abspath(run), bootstrap=resamples, verify_us_per_token=slope)
    if pool:
        runs = [_abspath(run)] + [_abspath(r) for r in pool]
        more = [predict_run(r, bootstrap=resamples, verify_us_per_token=slope) for r in runs[1:]]
        pred = pool_predictions([pred, *more], runs)
    if given is not None:
        pred["plan"] = prediction_plan(pred, given, "given")
    else:
        cached = spread_for_command(
            cache_path(None), pred.get("server_command"), {"speculative-num-steps": None}
        )
        pred["plan"] = prediction_plan(
            pred, cached["spread"] if cached else None, f"cached, {cached['df']} df" if cached else "none"
        )
    with_start_spread(pred, pred["plan"].get("spread"), pred["plan"].get("spread_source") or "none")
    target = Path(_abspath(out)) if out else Path(_abspath(run)) / "predict.json"
    if target.is_dir():
        target = target / "predict.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(pred, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    sys.stdout.write(render(pred))
    notes = plan_lines(pred["plan"])
    for line in notes:
        print(line)
    print(f"prediction: {target}")
    if missing("report"):
        print(f"report.html: not written ({PAGE_NEEDS})", file=sys.stderr)
    else:
        from patchkit.report.html import write_prediction_page

        print(f"page: {write_prediction_page(target.parent, pred, notes)}")


profile.add_task(profile_collect, "collect")
profile.add_task(profile_report, "report")
profile.add_task(profile_predict, "predict")
# ----------------------------------------------------------------------------- end of profile.collect, profile.report
