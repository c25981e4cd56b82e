"""Operations (check, verify, apply, revert, status) over one target or a fleet.

Each operation is one program per target (see targetprog). A fleet runs hosts in parallel with a
bounded pool; apply on a fleet is two-phase: stage everywhere, commit only when every host staged,
undo everywhere otherwise. A fleet may carry one series per host (PerHostSeries, what
`--series auto` picks on a mixed fleet): each host gets its own program, apply stays two-phase
across all of them, and every HostResult names its series.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields

from patchkit.engine.answer import Answer, parse_answer
from patchkit.engine.compilecache import compiled_series
from patchkit.engine.host_result import (  # noqa: F401 (re-exported)
    FileReport,
    HostResult,
    HostState,
    interpret,
)
from patchkit.engine.series import Series
from patchkit.engine.targetprog import Compiled, build_program
from patchkit.errors import EXIT_INVALID, EXIT_OK, EXIT_REFUSED, PatchkitError
from patchkit.settings import PATCHKIT_DEFAULTS
from patchkit.transport import LocalTransport, Transport, expand_targets, interrupts


@dataclass
class PerHostSeries:
    """One series (folder or Series) per target, in the order of the targets."""

    series: list


PER_HOST = "per-host"  # OpResult.series when the hosts carry different series


@dataclass
class OpResult:
    op: str
    series: str
    digest: str
    hosts: list[HostResult]

    @property
    def per_host(self) -> bool:
        return self.series == PER_HOST

    @property
    def exit_code(self) -> int:
        return max((h.exit_code for h in self.hosts), default=EXIT_OK)

    def to_json(self) -> dict:
        return {
            "op": self.op,
            "series": self.series,
            "digest": self.digest,
            "exit_code": self.exit_code,
            "hosts": [asdict(h) for h in self.hosts],
        }


@dataclass
class Options:
    """What an operation needs; the CLI builds it from patchkit.settings.PatchSettings, whose
    defaults (PATCHKIT_DEFAULTS) these are."""

    layout: str = PATCHKIT_DEFAULTS["layout"]
    force: bool = False
    keep_journal: bool = PATCHKIT_DEFAULTS["keep_journal"]
    keep_journal_where: str = "--keep-journal"  # said when the journal is kept: the flag, or key and file
    dry_run: bool = False
    jobs: int = PATCHKIT_DEFAULTS["jobs"]
    timeout: float | None = PATCHKIT_DEFAULTS["timeout"]
    cwd: str | None = None
    container: str | None = None
    exec_prefix: str | None = None
    transport_options: dict = field(default_factory=dict)


# -- one target ------------------------------------------------------------------------------------


def options_from(settings) -> Options:
    """The Options of one operation from the typed task settings (patchkit.settings.PatchSettings):
    each field read by its name there, the transport's options translated once."""
    named = {f.name: getattr(settings, f.name) for f in fields(Options) if f.name != "transport_options"}
    return Options(**named, transport_options=settings.transport_options())


def run_program(
    compiled: Compiled, transport: Transport, op: str, opts: Options, phase: str = "all"
) -> tuple[Answer, int, float, int]:
    def run_once(single: bool):
        program = build_program(
            compiled,
            op,
            transport.root,
            layout=opts.layout,
            force=opts.force,
            phase=phase,
            single=single,
            keep_journal=opts.keep_journal,
        )
        result = transport.run(program, timeout=opts.timeout)
        return result, parse_answer(result.stdout), len(program)

    result, answer, size = run_once(single=False)
    if "retry single" in answer.flags:
        # A pinned file ends without a newline that no hunk shows: redo with one sed per file.
        result, answer, size = run_once(single=True)
    rc = result.returncode
    # exit 1 is the program's own "refused" only when it answered; a wrapper that failed before
    # the program ran (no such container, pod not found: exit 1) answers nothing but stderr
    if rc != 0 and not answer.errors and (rc != 1 or b"@pk " not in result.stdout):
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        answer.errors.append(
            (
                EXIT_REFUSED,
                f"the target program failed (exit {rc})" + (f": {' | '.join(tail)}" if tail else ""),
            )
        )
    return answer, rc, result.elapsed, size


def run_on(
    compiled: Compiled, transport: Transport, op: str, opts: Options, phase: str = "all"
) -> HostResult:
    """One operation on one target; an interrupt (patchkit.transport.interrupts) is raised
    again saying what the target program did with it and what it left there."""
    start = time.monotonic()
    ans = None
    try:
        ans, rc, _, nbytes = run_program(compiled, transport, op, opts, phase)
        host = interpret(compiled, op, ans, rc, transport.label, journal_kept_by=opts.keep_journal_where)
        host.bytes_sent = nbytes
    except KeyboardInterrupt as e:
        sig = getattr(e, "signal", None) or interrupts.requested() or 2
        raise interrupts.interrupted(sig, interrupted_note(transport.label, e, transport)) from None
    except PatchkitError as e:
        host = HostResult(
            target=transport.label,
            op=op,
            state=HostState.UNREACHABLE if e.exit_code == 1 else HostState.ERROR,
            exit_code=e.exit_code,
            messages=[e.message],
        )
    host.elapsed = time.monotonic() - start
    if interrupts.requested() is not None and ans is not None and "hold" in ans.steps and host.ok:
        host.messages.append(
            "interrupted while writing: a commit, restore or unstage is never cut short, so it finished"
        )
    return host


def interrupted_note(label: str, exc: BaseException, transport: Transport | None = None) -> str:
    """What an interrupted target program did (``exc.run_result``: its answer, None when it
    never started) and, where it could not clean up (SIGKILL), what it left on the target (read
    there through ``transport``)."""
    result = getattr(exc, "run_result", None)
    if result is None:
        return f"{label}: not started"
    try:
        ans = parse_answer(result.stdout)
    except PatchkitError:
        ans = Answer()
    if ans.pid is None:
        return f"{label}: stopped before the target program began; nothing written"
    if ans.interrupted is not None:
        if "lock" not in ans.steps:
            return f"{label}: the target program stopped before it locked the target; nothing written"
        took = "its lock, staged files and copies" if "stage" in ans.steps else "its lock"
        return f"{label}: the target program stopped and removed {took}; nothing written"
    how = f"killed by signal {-result.returncode}" if result.returncode < 0 else f"exit {result.returncode}"
    left = _state_left(transport) if transport is not None else None
    if left == []:
        return f"{label}: the target program ended ({how}) and left nothing; nothing written"
    what = (
        f".patchkit/ holds {', '.join(left)}"
        if left
        else "its lock and, as far as it got, .patchkit/stage, .patchkit/orig and a manifest"
    )
    files = " (each file is its original or its patched text)" if "hold" in ans.steps else "; nothing written"
    return (
        f"{label}: the target program ended without cleaning up ({how}): {what}{files}; the next "
        "patch.apply or patch.revert takes the dead program's lock over and removes them "
        "(patch.status lists them)"
    )


def _state_left(transport: Transport) -> list[str] | None:
    """The names in the target's .patchkit/ (the manifest with its state), read with one short
    program that no interrupt stops; None when it cannot be read."""
    import shlex

    program = (
        f"cd {shlex.quote(transport.root)} 2>/dev/null && [ -d .patchkit ] || exit 0\n"
        'for f in .patchkit/* .patchkit/.[!.]*; do [ -e "$f" ] && echo "${f#.patchkit/}"; done\n'
        "[ -f .patchkit/manifest ] && sed -n 's/^state /state /p' .patchkit/manifest\n"
        "exit 0\n"
    ).encode()
    try:
        with interrupts.cleanup_runs():
            got = transport.run(program, timeout=30).stdout.decode("utf-8", "replace").split("\n")
    except PatchkitError:
        return None
    state = next((ln[6:] for ln in got if ln.startswith("state ")), "")
    names = [ln for ln in got if ln and not ln.startswith("state ")]
    return [f"manifest ({state})" if n == "manifest" and state else n for n in names]


# -- public operations -------------------------------------------------------------------------------


def _prepare(series: Series | str | PerHostSeries, targets: list[str], opts: Options, full: bool = True):
    """(one Compiled per target, one Transport per target)."""
    if not targets:
        raise PatchkitError("no --target given (and none configured)", EXIT_INVALID)
    # k8s:NS/SELECTOR:ROOT becomes one target per running pod before any fleet logic
    kw = dict(cwd=opts.cwd, container=opts.container, exec_prefix=opts.exec_prefix, **opts.transport_options)
    targets = expand_targets(targets, **kw)
    if isinstance(series, PerHostSeries):
        if len(series.series) != len(targets):
            raise PatchkitError(f"{len(series.series)} series for {len(targets)} targets", EXIT_INVALID)
        made: dict = {}
        compileds = []
        for s in series.series:
            k = id(s) if isinstance(s, Series) else str(s)
            if k not in made:
                made[k] = compiled_series(s, full=full)
            compileds.append(made[k])
    else:
        compileds = [compiled_series(series, full=full)] * len(targets)
    transports: list[Transport] = expand_targets(targets, open_all=True, **kw)
    _refuse_twice(targets, transports)
    return compileds, transports


def _result(op: str, compileds: list[Compiled], hosts: list[HostResult]) -> OpResult:
    """The answer; each host names its series, the whole names one or says per-host."""
    for c, h in zip(compileds, hosts):
        h.series, h.digest = c.series.name, c.series.digest
    if len({c.series.digest for c in compileds}) > 1:
        return OpResult(op, PER_HOST, "", hosts)
    return OpResult(op, compileds[0].series.name, compileds[0].series.digest, hosts)


def _refuse_twice(targets, transports) -> None:
    """A fleet naming one target twice would race with itself on that host's lock."""
    seen: dict = {}
    for spec, t in zip(targets, transports):
        key = os.path.realpath(t.root) if isinstance(t, LocalTransport) else t.label.rstrip("/")
        if key in seen:
            _close_own(targets, transports)
            raise PatchkitError(
                f"target {t.label} is listed twice ({seen[key]!r} and {_spec(spec)!r});"
                " name each target once",
                EXIT_INVALID,
            )
        seen[key] = _spec(spec)


def _spec(spec) -> str:
    return spec if isinstance(spec, str) else spec.label


def _each(transports, fn, jobs: int) -> list[HostResult]:
    """``fn`` on every target; an interrupt is raised once every host has ended, saying what
    each did (a host that finished, one that stopped, one never started)."""
    settled = _settled(transports, fn, jobs)
    stopped = [x for x in settled if isinstance(x, KeyboardInterrupt)]
    if stopped:
        notes = [str(x.args[0]) if isinstance(x, KeyboardInterrupt) else _finished(x) for x in settled]
        raise interrupts.interrupted(_signal_of(stopped), "; ".join(notes))
    return settled  # no interrupt: every one a HostResult


def _settled(transports, fn, jobs: int) -> list:
    """``fn`` on every target, in parallel up to ``jobs``: a HostResult or the interrupt each ended with."""

    def settle(t):
        try:
            return fn(t)
        except KeyboardInterrupt as e:
            return e

    if len(transports) == 1:
        return [settle(transports[0])]
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(transports)))) as pool:
        return list(pool.map(settle, transports))


def _signal_of(stopped: list) -> int:
    return getattr(stopped[0], "signal", None) or interrupts.requested() or 2


def _finished(host: HostResult) -> str:
    return f"{host.target}: finished before the interrupt ({host.state})"


def _close_own(targets, transports) -> None:
    """Close the transports made here; a caller's Transport objects stay open for reuse."""
    given = {id(spec) for spec in targets if isinstance(spec, Transport)}
    for t in transports:
        if id(t) not in given:
            t.close()


def _simple(op: str, series, targets, opts: Options | None) -> OpResult:
    opts = opts or Options()
    compileds, transports = _prepare(series, targets, opts, full=op == "verify")

    def one(pair) -> HostResult:
        compiled, t = pair
        before = t.connection_probe() if op == "status" else None
        host = run_on(compiled, t, op, opts)
        if op == "status":  # e.g. whether an SSH master is alive for the next command
            host.messages += t.connection_notes(before)
        return host

    try:
        hosts = _each(list(zip(compileds, transports)), one, opts.jobs)
    finally:
        _close_own(targets, transports)
    return _result(op, compileds, hosts)


def check(series, targets, opts=None) -> OpResult:
    return _simple("check", series, targets, opts)


def verify(series, targets, opts=None) -> OpResult:
    return _simple("verify", series, targets, opts)


def status(series, targets, opts=None) -> OpResult:
    return _simple("status", series, targets, opts)


def revert(series, targets, opts=None) -> OpResult:
    return _simple("revert", series, targets, opts)


def unlock(series, targets, opts=None) -> OpResult:
    return _simple("unlock", series, targets, opts)


def apply(series, targets, opts=None) -> OpResult:
    opts = opts or Options()
    if opts.dry_run:
        result = _simple("verify", series, targets, opts)
        result.op = "apply --dry-run"
        return result
    compileds, transports = _prepare(series, targets, opts)
    try:
        if len(transports) == 1:
            hosts = [run_on(compileds[0], transports[0], "apply", opts)]
        else:
            hosts = _fleet_apply(compileds, transports, opts)
    finally:
        _close_own(targets, transports)
    return _result("apply", compileds, hosts)


def _fleet_apply(compileds: list[Compiled], transports: list[Transport], opts: Options) -> list[HostResult]:
    """Stage on every host (each with its own series' program), commit only when all staged."""
    compiled_of = {id(t): c for c, t in zip(compileds, transports)}
    staged = _settled(
        transports, lambda t: run_on(compiled_of[id(t)], t, "apply", opts, phase="stage"), opts.jobs
    )
    if interrupts.requested() is not None:
        _fleet_interrupted(compiled_of, transports, staged, [None] * len(transports), opts)
    if not all(h.ok for h in staged):

        def undo(pair):
            t, h = pair
            if h.ok and h.state == HostState.STAGED:
                u = run_on(compiled_of[id(t)], t, "unstage", opts)
                h.journal = u.journal
                h.messages.append(
                    "staged files removed (another host failed)"
                    if u.ok
                    else f"could not remove staged files: {'; '.join(u.messages)}"
                )
                h.state = HostState.PRISTINE if u.ok else HostState.STAGED
                h.exit_code = EXIT_REFUSED
                h.messages.append("not applied: the fleet is all-or-nothing")
            return h

        return _each(list(zip(transports, staged)), undo, opts.jobs)
    committed = _settled(transports, lambda t: run_on(compiled_of[id(t)], t, "commit", opts), opts.jobs)
    if interrupts.requested() is not None:
        _fleet_interrupted(compiled_of, transports, staged, committed, opts)
    for c, s in zip(committed, staged):
        c.elapsed += s.elapsed
        c.bytes_sent += s.bytes_sent
        if s.state == HostState.APPLIED:  # already applied before the fleet run
            c.messages = s.messages
    if all(h.ok for h in committed):
        return committed

    def rollback(pair):
        t, h = pair
        if h.ok:
            r = run_on(compiled_of[id(t)], t, "revert", opts)
            h.messages.append(
                "rolled back (another host failed to commit)"
                if r.ok
                else f"ROLLBACK FAILED: {'; '.join(r.messages)}"
            )
            h.state = HostState.PRISTINE if r.ok else HostState.PARTIAL
            h.exit_code = EXIT_REFUSED
            h.written = []
        return h

    return _each(list(zip(transports, committed)), rollback, opts.jobs)


def _fleet_interrupted(compiled_of: dict, transports: list, staged: list, committed: list, opts: Options):
    """An interrupt during a fleet's apply: all-or-nothing still, so every host this run staged
    is unstaged and every host it committed is reverted (runs no signal stops); then the
    interrupt is raised saying, per host, what was done."""
    notes = []
    with interrupts.cleanup_runs():
        for t, s, c in zip(transports, staged, committed):
            label = t.label
            if isinstance(s, KeyboardInterrupt):
                notes.append(str(s.args[0]))
                continue
            if s.state != HostState.STAGED:  # refused, or already applied before this run
                notes.append(f"{label}: {s.state}, left as it was")
                continue
            done = isinstance(c, HostResult) and c.ok and c.state == HostState.APPLIED
            undo = run_on(compiled_of[id(t)], t, "revert" if done else "unstage", opts)
            if undo.ok:
                notes.append(f"{label}: {'committed, then reverted' if done else 'staged, then unstaged'}")
            else:
                notes.append(f"{label}: {'REVERT' if done else 'UNSTAGE'} FAILED: {'; '.join(undo.messages)}")
    sig = next(
        (getattr(x, "signal", None) for x in [*staged, *committed] if isinstance(x, KeyboardInterrupt)), None
    )
    raise interrupts.interrupted(
        sig or interrupts.requested() or 2,
        "; ".join(notes) + "; the fleet is all-or-nothing: nothing applied",
    )
