"""The profile target: the pinned transformers installed into an ignored folder, and its patching.

``ensure_site`` installs the wheel named by the series' pin (sha256-checked by
patchkit.upstream) with ``pip install --no-deps --target`` -- a real installed-package layout
(``transformers/...`` plus ``transformers-5.17.0.dist-info``), which the engine patches exactly
as it would patch a remote site-packages. The dependencies of transformers come from the
project's environment (the ``profile`` extra).

``patched(series, site)`` is the apply-always-revert bracket used by profile.run and
profile.sweep: verify, apply, yield, then revert in ``finally`` (on success, failure and
Ctrl-C alike) and check with ``patch.status`` that the tree is pristine again.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

from patchkit.engine.host_result import HostState
from patchkit.errors import PatchkitError, Refused, Terminated
from patchkit.locations import import_root, series_root, work_base
from patchkit.settings import EMBEDDED_SERIES
from patchkit.upstream import fetch_wheel, read_pin

DEFAULT_SERIES = series_root() / EMBEDDED_SERIES
DEFAULT_SITE = work_base() / "tf-site"


class ProfileError(Refused):
    """The profile run could not be prepared, failed, or left the tree in an unexpected state."""


def _ops():
    from patchkit import ops

    return ops, ops.Options(layout="installed")


def _host(result):
    return result.hosts[0]


def _describe(result) -> str:
    host = _host(result)
    parts = [f"{result.op}: {host.state} (exit {result.exit_code})"]
    parts += host.messages
    parts += [
        f"{f.path}: {f.state}{' - ' + f.detail if f.detail else ''}"
        for f in host.files
        if f.state not in ("ok", "pristine", "applied", "original")
    ]
    return "; ".join(parts)


def site_state(series_dir: Path, site: Path) -> str:
    """patch.status of the site: pristine | applied | partial | modified | drifted | ..."""
    ops, opts = _ops()
    return _host(ops.status(str(series_dir), [str(site)], opts)).state


def _install(wheel: Path, site: Path) -> None:
    site.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=site.name + ".install-", dir=site.parent))
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        "--no-compile",
        "--quiet",
        "--target",
        str(staging),
        str(wheel),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise ProfileError(f"pip could not install {wheel.name} into {site}: {tail}")
    os.replace(staging, site)


def ensure_site(
    series_dir: Path = DEFAULT_SERIES, site: Path = DEFAULT_SITE, *, wheelhouse=None, log=print
) -> Path:
    """A pristine installed tree of the pinned distribution at ``site``; returns it.

    An existing site is reused when patch.status says pristine; when a killed run left it
    applied, it is reverted first. Any other state is refused, except for the default site
    inside this repository's ignored .work/, which is reinstalled.
    """
    series_dir, site = Path(series_dir), Path(site)
    pin = read_pin(series_dir / "pin.toml")
    if not pin.version:
        raise ProfileError(f"{series_dir / 'pin.toml'}: the pin has no version to install")
    if site.exists():
        state = site_state(series_dir, site)
        if state == HostState.PRISTINE:
            return site
        if state in (HostState.APPLIED, HostState.PARTIAL):
            ops, opts = _ops()
            result = ops.revert(str(series_dir), [str(site)], opts)
            if result.exit_code == 0 and site_state(series_dir, site) == HostState.PRISTINE:
                log(f"profile: {site} was left {state} by an interrupted run; reverted it")
                return site
        if site.resolve() != DEFAULT_SITE.resolve():
            raise ProfileError(
                f"{site}: patch.status says {state}; restore it, or use another "
                "--site (the default .work/tf-site is reinstalled automatically)"
            )
        log(f"profile: {site} is {state}; reinstalling it")
        shutil.rmtree(site)
    wheel = fetch_wheel(pin.name, pin.version, wheelhouse=wheelhouse)
    log(f"profile: installing {wheel.path.name} ({wheel.trust}, sha256 {wheel.sha256[:12]}…) into {site}")
    _install(wheel.path, site)
    return site


def _raise_terminated(signum, frame):
    raise Terminated()


@contextmanager
def sigterm_interrupts():
    """While the body runs, SIGTERM raises Terminated (a KeyboardInterrupt), so the cleanup
    that Ctrl-C gets -- stop the servers, revert -- runs for a plain ``kill`` too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _sigint_deferred():
    """Let a quick revert finish: a Ctrl-C (or a SIGTERM, when ``sigterm_interrupts`` turned
    it into an interrupt) during it is remembered and raised afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda *a: caught.append(signal.SIGINT))
    term = signal.getsignal(signal.SIGTERM)
    defer_term = term is _raise_terminated
    if defer_term:
        signal.signal(signal.SIGTERM, lambda *a: caught.append(signal.SIGTERM))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if defer_term:
            signal.signal(signal.SIGTERM, term)
    if caught:
        raise Terminated() if signal.SIGTERM in caught else KeyboardInterrupt


@contextmanager
def patched(series_dir: Path, site: Path, *, log=print):
    """verify → apply → (body) → revert always → status must be pristine."""
    ops, opts = _ops()
    series, target = str(series_dir), [str(site)]
    verified = ops.verify(series, target, opts)
    if verified.exit_code != 0:
        raise ProfileError(f"{site}: {_describe(verified)}", verified.exit_code)
    applied = ops.apply(series, target, opts)
    if applied.exit_code != 0:
        raise ProfileError(f"{site}: {_describe(applied)}", applied.exit_code)
    log(f"profile: applied {Path(series_dir).name} to {site} ({len(_host(applied).written)} files written)")
    failure = None
    try:
        yield applied
    except BaseException as exc:
        failure = exc
        raise
    finally:
        with _sigint_deferred():
            reverted = ops.revert(series, target, opts)
            state = site_state(series_dir, site)
        if reverted.exit_code != 0 or state != HostState.PRISTINE:
            error = ProfileError(
                f"{site}: revert after the profile run failed, the tree is {state}: "
                f"{_describe(reverted)}; run: invoke patch.status --series {series} "
                f"--target {site}"
            )
            raise error from failure
        log(f"profile: reverted {site}; patch.status: pristine")


@contextmanager
def imported(series_dir: Path, site: Path, run_dir: Path, *, log=print):
    """The import mode's bracket: the hook folder written in ``run_dir`` (the site read,
    never written), yielded; nothing to revert after."""
    from patchkit.engine.importmode import write_hook

    try:
        hook = write_hook(str(series_dir), str(site), Path(run_dir) / "import-hook", layout="installed")
    except PatchkitError as exc:
        raise ProfileError(f"{site}: {exc.message}", exc.exit_code) from None
    log(
        f"profile: import mode, {Path(series_dir).name} patched in memory from {hook.path}; nothing written in {site}"
    )
    yield hook
    log(f"profile: import mode, nothing to revert in {site}")


def workload_env(site: Path, timer_mode: str | None) -> dict:
    """Environment for the workload: the patched tree first on the path, the timer mode."""
    env = dict(os.environ)
    paths = [str(Path(site).resolve()), str(import_root())]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if timer_mode:
        env["PATCHKIT_TIMER"] = timer_mode
    else:
        env.pop("PATCHKIT_TIMER", None)
    env.pop("PATCHKIT_TIMER_DIR", None)  # each point names its own directory
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded; make sure of it
    return env


__all__ = [
    "DEFAULT_SERIES",
    "DEFAULT_SITE",
    "PatchkitError",
    "ProfileError",
    "ensure_site",
    "imported",
    "patched",
    "site_state",
    "workload_env",
]
