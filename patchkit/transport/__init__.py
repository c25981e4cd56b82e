"""Transports: "a command that runs `sh -s` with our stdin" on a target.

Every operation sends one self-contained POSIX sh program on standard input and reads a
machine-readable answer from standard output. A transport knows only how to start that shell
(locally, over SSH, inside a container); it never interprets the program.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.errors import InvalidInput, TransportError


@dataclass
class RunResult:
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float = 0.0


@dataclass
class Transport:
    """Base: subclasses set `label`, `root` and build `argv()`."""

    label: str
    root: str
    shell: tuple[str, ...] = ("sh", "-s")
    env: dict[str, str] | None = field(default=None, repr=False)

    def argv(self) -> list[str]:
        return list(self.shell)

    def run(self, script: bytes, timeout: float | None = None) -> RunResult:
        argv = self.argv()
        start = time.monotonic()
        try:
            proc = subprocess.run(argv, input=script, capture_output=True, timeout=timeout, env=self.env)
        except FileNotFoundError as e:
            raise TransportError(f"{self.label}: cannot start {argv[0]!r}: {e.strerror}") from e
        except subprocess.TimeoutExpired as e:
            raise TransportError(f"{self.label}: no answer within {timeout:g} s") from e
        return RunResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)

    def close(self) -> None:
        """Release connections (SSH control masters); local targets hold none."""

    def connection_probe(self) -> object:
        """What connection_notes compares with after an operation (status reports it)."""
        return None

    def connection_notes(self, before: object) -> list[str]:
        """Sentences about the connection this target keeps between commands (none here)."""
        return []


@dataclass
class LocalTransport(Transport):
    """A directory on this machine."""


def _bad_chars(text: str) -> bool:
    return any(ch in text for ch in ("\0", "\n", "\r"))


# ---- target kinds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KindSetting:
    """A kind's own option of the patch tasks (``--k8s-container``) and setting of invoke.yaml
    (``patchkit.k8s_container``), passed on as the transport option of the same name.

    ``check(value, spec)`` is the kind's own check (InvalidInput); ``what`` names a bad value;
    ``default``: what the kind uses when no key sets it (None: nothing, the option is left out)."""

    name: str
    help: str
    check: Callable[[str, str], str]
    what: str
    default: str | None = None

    def help_after(self, *keys: str) -> str:
        """The help text of an option whose value comes from ``keys`` in turn (config keys),
        else from the kind's own default."""
        chain = [*keys, *([self.default] if self.default is not None else [])]
        return f"{self.help} (default: {', else '.join(chain)})" if chain else self.help


@dataclass(frozen=True)
class TargetKind:
    """One kind of --target string, declared by the module that knows it (its ``KIND``).

    ``prefix``: the start that names the kind (``"k8s:"``); None for a kind told by its shape
    (ssh/docker/container/exec, local paths), tried in turn after every prefixed kind.
    ``options``: the transport options it reads; together they are the names every target
    accepts (one set of site options serves a mixed fleet), any other name is refused.
    ``expand(spec, *, cwd, container, exec_prefix, **options) -> list[Transport]``: a prefixed
    kind's targets; a spec may stand for several (one per pod), and fleets expand it first.
    ``resolve(...)``: the one Transport of a spec (None: not this kind; unprefixed kinds); for
    a prefixed kind without one, its expansion must be exactly one target.
    ``settings``: its options of the patch tasks and keys of invoke.yaml (the built-in kinds
    only: patchkit.settings and patchkit.tasks read them when they are imported).
    """

    name: str
    prefix: str | None = None
    options: tuple[str, ...] = ()
    expand: Callable[..., list[Transport]] | None = None
    resolve: Callable[..., Transport | None] | None = None
    settings: tuple[KindSetting, ...] = ()


_REGISTERED: list[TargetKind] = []


def register_kind(kind: TargetKind) -> TargetKind:
    """Add a kind (a prefix may be registered once); returns it, for ``KIND = register_kind(...)``."""
    if kind.prefix is not None and any(k.prefix == kind.prefix for k in target_kinds()):
        raise ValueError(f"a target kind with the prefix {kind.prefix!r} is already registered")
    if kind.prefix is None and kind.resolve is None:
        raise ValueError(f"target kind {kind.name!r}: a kind without a prefix needs resolve")
    if kind.prefix is not None and kind.expand is None and kind.resolve is None:
        raise ValueError(f"target kind {kind.name!r}: give expand or resolve")
    _REGISTERED.append(kind)
    return kind


def unregister_kind(kind: TargetKind) -> None:
    _REGISTERED.remove(kind)


def target_kinds() -> list[TargetKind]:
    """The kinds, in the order unprefixed ones are tried: ssh/docker/exec shapes, k8s:, the
    registered ones, and last a local directory (which takes whatever is left)."""
    from patchkit.transport import k8s, local, remote

    return [remote.KIND, k8s.KIND, *_REGISTERED, local.KIND]


def option_names() -> tuple[str, ...]:
    """Every transport option some kind reads (the whitelist), in the kinds' order."""
    names: list[str] = []
    for kind in target_kinds():
        names += [o for o in kind.options if o not in names]
    return tuple(names)


def kind_settings() -> dict[str, KindSetting]:
    """Every kind's settings by name (patchkit.settings, patchkit.tasks)."""
    return {s.name: s for kind in target_kinds() for s in kind.settings}


def check_options(options: dict) -> dict:
    """The options given (None: not given); a name no kind reads is refused (exit 2)."""
    given = {k: v for k, v in options.items() if v is not None}
    known = option_names()
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InvalidInput(f"unknown transport option(s): {', '.join(unknown)} (known: {', '.join(known)})")
    return given


def prefixed_kind(spec) -> TargetKind | None:
    """The kind whose prefix starts ``spec`` (the longest), or None."""
    if not isinstance(spec, str):
        return None
    found = [k for k in target_kinds() if k.prefix is not None and spec.startswith(k.prefix)]
    return max(found, key=lambda k: len(k.prefix or "")) if found else None


def parse_target(
    spec: str,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> Transport:
    """Turn a --target string into one Transport, through the kind it names (target_kinds).

    Local directories may be relative to `cwd` (where invoke runs). A prefixed kind that
    stands for several targets (k8s:) must come to exactly one here.
    """
    if not spec or _bad_chars(spec):
        raise InvalidInput(f"bad target spec {spec!r}: empty or contains NUL/newline")
    kw = dict(cwd=cwd, container=container, exec_prefix=exec_prefix, **options)
    kind = prefixed_kind(spec)
    if kind is not None:
        check_options(options)
        if kind.resolve is not None:
            one = kind.resolve(spec, **kw)
            assert one is not None, f"target kind {kind.name!r} resolved {spec!r} to nothing"
            return one
        assert kind.expand is not None  # register_kind: expand or resolve
        made = kind.expand(spec, **kw)
        if len(made) != 1:
            for t in made:
                t.close()
            raise InvalidInput(
                f"target {spec!r}: it stands for {len(made)} targets; here one target is needed"
            )
        return made[0]
    for kind in target_kinds():
        if kind.prefix is None and kind.resolve is not None:
            found = kind.resolve(spec, **kw)
            if found is not None:
                return found
    raise AssertionError("the local kind takes every spec")  # pragma: no cover


def expand_targets(
    targets,
    *,
    open_all: bool = False,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> list:
    """The targets of a fleet, in order: every spec of a prefixed kind replaced by its
    Transports (k8s: one per running pod; before any fleet logic, so they are one fleet).
    Other specs stay strings, or with ``open_all`` become their Transport (parse_target);
    Transports given pass through. Every caller (ops, the patch tasks, --series auto,
    profile.remote) expands its targets here."""
    kw = dict(cwd=cwd, container=container, exec_prefix=exec_prefix, **options)
    out: list = []
    given = {id(t) for t in targets}
    try:
        for spec in targets:  # every prefixed kind first (kubectl get pods), then the rest
            kind = prefixed_kind(spec)
            if kind is not None and kind.expand is not None:
                check_options(options)
                out += kind.expand(spec, **kw)
            else:
                out.append(spec)
        if open_all:
            for i, spec in enumerate(out):
                if isinstance(spec, str):
                    out[i] = parse_target(spec, **kw)
    except BaseException:
        for t in out:
            if not isinstance(t, str) and id(t) not in given:
                t.close()
        raise
    return out


def resolve_targets(
    specs,
    *,
    inventory: str | None = None,
    limit: str | None = None,
    root: str | None = None,
    open_all: bool = False,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> list:
    """The targets of a run, in order: ``specs`` (--target strings, or Transports), then the
    hosts of an Ansible ``inventory`` (chosen by ``limit``, at ``root``), every prefixed kind's
    spec expanded (expand_targets: a k8s: selector is every pod it matches). The one function
    every caller resolves its targets through: the patch tasks, ``--series auto`` and
    profile.remote (its run, its sweep and its --series auto), so a kind, a kind's settings
    (``options``) and an inventory mean the same everywhere. The caller closes the Transports
    (``open_all``: every target opened here)."""
    kw = dict(cwd=cwd, container=container, exec_prefix=exec_prefix, **options)
    targets: list = list(specs)
    try:
        if inventory:
            from patchkit.transport.inventory import inventory_transports

            targets += inventory_transports(
                os.path.join(cwd or "", os.path.expanduser(inventory)), limit, root, **kw
            )
        return expand_targets(targets, open_all=open_all, **kw)
    except BaseException:
        for t in targets:
            if not isinstance(t, str) and t not in specs:
                t.close()
        raise
