"""Transports: "a command that runs `sh -s` with our stdin" on a target.

Every operation sends one self-contained POSIX sh program on standard input and reads a
machine-readable answer from standard output. A transport knows only how to start that shell
(locally, over SSH, inside a container); it never interprets the program.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.errors import InvalidInput, TransportError
from patchkit.transport import interrupts

# How often a running operation checks its child, the overall deadline and a noted interrupt.
_POLL_S = 0.05
_CHUNK = 1 << 16
_PID_LINE = re.compile(rb"^@pk pid (\d+)$", re.M)  # the target program's first line (target.sh)


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
        """``script`` to the shell, its answer back (an interrupt: patchkit.transport.interrupts)."""
        proc, start = self.start_client()
        with proc:
            try:
                stdout, stderr = exchange(
                    proc,
                    script,
                    timeout,
                    start,
                    timed_out=lambda: TransportError(f"{self.label}: no answer within {timeout:g} s"),
                    signal_program=self.signal_program,
                )
            except BaseException:  # outside an operation's deferred interrupts: as subprocess.run
                if proc.poll() is None:
                    proc.kill()
                raise
        return finished(RunResult(proc.returncode, stdout, stderr, time.monotonic() - start))

    def start_client(self, cannot_start: str | None = None) -> tuple[subprocess.Popen, float]:
        """The client program started, the interrupt handling told first: its process and its
        time.monotonic() start. A client that is not there: TransportError, ``cannot_start``
        (default: this target's label and the program's name) and why."""
        interrupts.program_starting()
        argv = self.argv()
        start = time.monotonic()
        try:
            return start_program(argv, self.env), start
        except FileNotFoundError as e:
            raise TransportError(
                f"{cannot_start or f'{self.label}: cannot start {argv[0]!r}'}: {e.strerror}"
            ) from e

    def signal_program(self, pid: int, sig: int) -> None:
        """Send ``sig`` to the target program ``pid`` this transport is running: a second, short
        program through the same shell (the same host, container or pod), never a signal to
        the local client, which would leave the program alone (SSH) or kill it mid-step."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                self.argv(),
                input=interrupts.kill_program(pid, sig),
                capture_output=True,
                env=self.env,
                timeout=SIGNAL_TIMEOUT_S,
                start_new_session=True,
            )

    def close(self) -> None:
        """Release connections (SSH control masters); local targets hold none."""

    def connection_probe(self) -> object:
        """What connection_notes compares with after an operation (status reports it)."""
        return None

    def connection_notes(self, before: object) -> list[str]:
        """Sentences about the connection this target keeps between commands (none here)."""
        return []


# the short program that signals a running one gets this long (it rides an SSH master when one is up)
SIGNAL_TIMEOUT_S = 15.0
# an interrupted run whose program has not said its pid within this long is stopped locally
PID_GRACE_S = 2.0


def start_program(argv: list[str], env: dict[str, str] | None) -> subprocess.Popen:
    """The shell that reads a target program on stdin; during an operation in a session of its
    own (patchkit.transport.interrupts: a terminal's Ctrl-C reaches it only through us)."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        bufsize=0,
        start_new_session=interrupts.active(),
    )


def exchange(
    proc: subprocess.Popen,
    script: bytes,
    timeout: float | None,
    start: float,
    *,
    timed_out: Callable[[], BaseException],
    signal_program: Callable[[int, int], None],
    check: Callable[[subprocess.Popen], None] | None = None,
) -> tuple[bytes, bytes]:
    """Send the program, collect the answer (stdout, stderr) until both pipes close; the child
    is killed and ``timed_out()`` raised past ``timeout`` seconds from ``start``. A noted
    interrupt (patchkit.transport.interrupts) is passed on once the program has said its pid:
    ``signal_program(pid, signal)``, then the answer is read on to its end; a program that has
    not said it within PID_GRACE_S has not begun, and its client is terminated. ``check(proc)``
    each round may raise (SSH: its client killed)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None, "pipes"
    out, err = bytearray(), bytearray()
    view, offset = memoryview(script), 0
    signalled, noted = False, 0.0
    with selectors.DefaultSelector() as selector:
        if script:
            os.set_blocking(proc.stdin.fileno(), False)
            selector.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        readers = 2
        while readers:
            for key, _ in selector.select(_POLL_S):
                if key.fileobj is proc.stdin:
                    try:
                        offset += os.write(key.fd, view[offset : offset + _CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        offset = len(view)
                    if offset >= len(view):
                        selector.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                data = os.read(key.fd, _CHUNK)
                if data:
                    key.data.extend(data)
                else:
                    selector.unregister(key.fileobj)
                    readers -= 1
            if not readers:
                break
            sig = interrupts.deliverable()
            if sig is not None and not signalled:
                noted = noted or time.monotonic()
                found = _PID_LINE.search(out)
                if found:  # the program's first line: from it on, its shell is there to be told
                    signalled = True
                    signal_program(int(found.group(1)), sig)
                elif time.monotonic() - noted >= PID_GRACE_S:
                    # no shell reads the program yet (a connection, a wrapper still starting):
                    # stop the client, and with it the program before its first line ran
                    signalled = True
                    _stop_client(proc, signal.SIGTERM)
            elif sig is not None and noted and time.monotonic() - noted >= 2 * PID_GRACE_S:
                if not _PID_LINE.search(out):
                    _stop_client(proc, signal.SIGKILL)  # what SIGTERM left holding our pipes
            if timeout is not None and time.monotonic() - start >= timeout:
                proc.kill()
                proc.wait()
                raise timed_out()
            if check is not None:
                check(proc)
    proc.wait()
    return bytes(out), bytes(err)


def _stop_client(proc: subprocess.Popen, sig: int) -> None:
    """``sig`` to the client and what it started (its own session, during an operation)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if interrupts.active() and os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def finished(result: RunResult) -> RunResult:
    """``result``, or, when an interrupt was noted and the program ended by it (exit 129, 130,
    143, or a signal of its own), the interrupt carrying it (patchkit.transport.interrupts).
    A program that ended on its own (0 done, 1 refused, 2 invalid) is returned as usual."""
    sig = interrupts.deliverable()
    if sig is not None and result.returncode not in (0, 1, 2):
        raise interrupts.interrupted(sig, run_result=result)
    return result


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
    ``default``: what the kind uses when no key sets it (None: nothing, the option is left out);
    ``example``: a value its check takes (what a user might write; the tests set it)."""

    name: str
    help: str
    check: Callable[[str, str], str]
    what: str
    default: str | None = None
    example: str = ""

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
    ``settings``: its options of the tasks and keys of invoke.yaml (rows of patchkit.settings'
    option table, made when that module is imported: a kind declares them by being found then,
    built in or through the ``patchkit.target_kinds`` entry points; target_kinds).
    ``fallback``: the kind that takes whatever no other kind took (local folders), tried last.
    ``inventory_var``: the host variable of an Ansible inventory that makes a host this kind's
    (``patchkit_k8s``); ``inventory(value, *, root, host, **kw) -> list[Transport]`` makes its
    targets, ``kw`` the transport options with the host's own ``patchkit_<setting>`` variables
    over them (patchkit.transport.inventory).
    """

    name: str
    prefix: str | None = None
    options: tuple[str, ...] = ()
    expand: Callable[..., list[Transport]] | None = None
    resolve: Callable[..., Transport | None] | None = None
    settings: tuple[KindSetting, ...] = ()
    fallback: bool = False
    inventory_var: str | None = None
    inventory: Callable[..., list[Transport]] | None = None


_REGISTERED: list[TargetKind] = []
# the entry point group a kind outside patchkit is found by: NAME = "module" (imported: it registers)
ENTRY_POINTS = "patchkit.target_kinds"
_FOUND = False


def register_kind(kind: TargetKind) -> TargetKind:
    """Add a kind (a prefix may be registered once); returns it, for ``KIND = register_kind(...)``."""
    find_kinds()  # the built-in and installed kinds first: a prefix of theirs is taken
    if kind.prefix is not None and any(k.prefix == kind.prefix for k in _REGISTERED):
        raise ValueError(f"a target kind with the prefix {kind.prefix!r} is already registered")
    if kind.prefix is None and kind.resolve is None:
        raise ValueError(f"target kind {kind.name!r}: a kind without a prefix needs resolve")
    if kind.prefix is not None and kind.expand is None and kind.resolve is None:
        raise ValueError(f"target kind {kind.name!r}: give expand or resolve")
    _REGISTERED.append(kind)
    return kind


def unregister_kind(kind: TargetKind) -> None:
    _REGISTERED.remove(kind)


def find_kinds() -> None:
    """Import, once, every module of this package (each kind's module registers its KIND when
    imported) and every module named by a ``patchkit.target_kinds`` entry point: no kind is
    named here."""
    global _FOUND
    if _FOUND:
        return
    _FOUND = True
    import importlib
    import importlib.metadata
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        entry.load()


def target_kinds() -> list[TargetKind]:
    """The kinds, in the order unprefixed ones are tried: as registered, and last the fallback
    (a local directory, which takes whatever is left)."""
    find_kinds()
    return [k for k in _REGISTERED if not k.fallback] + [k for k in _REGISTERED if k.fallback]


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
