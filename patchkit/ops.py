"""Operations (check, verify, apply, revert, status) over one target or a fleet.

Each operation is one program per target (see targetprog). A fleet runs hosts in parallel with a
bounded pool; apply on a fleet is two-phase: stage everywhere, commit only when every host staged,
undo everywhere otherwise.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from patchkit.engine.answer import Answer, parse_answer
from patchkit.engine.compilecache import compiled_series
from patchkit.engine.verdict import FileReport, HostResult, interpret  # noqa: F401 (re-exported)
from patchkit.errors import EXIT_INVALID, EXIT_OK, EXIT_REFUSED, PatchkitError
from patchkit.engine.series import Series
from patchkit.engine.targetprog import Compiled, build_program
from patchkit.transport import Transport, parse_target


@dataclass
class OpResult:
    op: str
    series: str
    digest: str
    hosts: list[HostResult]

    @property
    def exit_code(self) -> int:
        return max((h.exit_code for h in self.hosts), default=EXIT_OK)

    def to_json(self) -> dict:
        return {"op": self.op, "series": self.series, "digest": self.digest,
                "exit_code": self.exit_code, "hosts": [asdict(h) for h in self.hosts]}


@dataclass
class Options:
    layout: str = "auto"
    force: bool = False
    keep_journal: bool = False
    dry_run: bool = False
    jobs: int = 8
    timeout: float | None = None
    cwd: str | None = None
    container: str | None = None
    exec_prefix: str | None = None
    transport_options: dict = field(default_factory=dict)


# -- one target ------------------------------------------------------------------------------------

def run_program(compiled: Compiled, transport: Transport, op: str, opts: Options,
                phase: str = "all") -> tuple[Answer, int, float, int]:
    program = build_program(compiled, op, transport.root, layout=opts.layout,
                            force=opts.force, phase=phase, keep_journal=opts.keep_journal)
    result = transport.run(program, timeout=opts.timeout)
    answer = parse_answer(result.stdout)
    if "retry single" in answer.flags:
        # A pinned file ends without a newline that no hunk shows: redo with one sed per file.
        program = build_program(compiled, op, transport.root, layout=opts.layout,
                                force=opts.force, phase=phase, single=True,
                                keep_journal=opts.keep_journal)
        result = transport.run(program, timeout=opts.timeout)
        answer = parse_answer(result.stdout)
    rc = result.returncode
    if rc not in (0, 1) and not answer.errors:
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        answer.errors.append((EXIT_REFUSED, f"the target program failed (exit {rc})"
                              + (f": {' | '.join(tail)}" if tail else "")))
    return answer, rc, result.elapsed, len(program)


def run_on(compiled: Compiled, transport: Transport, op: str, opts: Options,
           phase: str = "all") -> HostResult:
    start = time.monotonic()
    try:
        ans, rc, _, nbytes = run_program(compiled, transport, op, opts, phase)
        host = interpret(compiled, op, ans, rc, transport.label)
        host.bytes_sent = nbytes
    except PatchkitError as e:
        host = HostResult(target=transport.label, op=op, state="unreachable" if e.exit_code == 1 else "error",
                          exit_code=e.exit_code, messages=[e.message])
    host.elapsed = time.monotonic() - start
    return host


# -- public operations -------------------------------------------------------------------------------

def _prepare(series: Series | str, targets: list[str], opts: Options, full: bool = True):
    compiled = compiled_series(series, full=full)
    if not targets:
        raise PatchkitError("no --target given (and none in invoke.yaml)", EXIT_INVALID)
    transports = [t if isinstance(t, Transport) else
                  parse_target(t, cwd=opts.cwd, container=opts.container,
                               exec_prefix=opts.exec_prefix, **opts.transport_options)
                  for t in targets]
    return compiled, transports


def _each(transports, fn, jobs: int) -> list[HostResult]:
    if len(transports) == 1:
        return [fn(transports[0])]
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(transports)))) as pool:
        return list(pool.map(fn, transports))


def _close_own(targets, transports) -> None:
    """Close the transports made here; a caller's Transport objects stay open for reuse."""
    for spec, t in zip(targets, transports):
        if not isinstance(spec, Transport):
            t.close()


def _simple(op: str, series, targets, opts: Options | None) -> OpResult:
    opts = opts or Options()
    compiled, transports = _prepare(series, targets, opts, full=op == "verify")

    def one(t: Transport) -> HostResult:
        before = t.connection_probe() if op == "status" else None
        host = run_on(compiled, t, op, opts)
        if op == "status":      # e.g. whether an SSH master is alive for the next command
            host.messages += t.connection_notes(before)
        return host
    try:
        hosts = _each(transports, one, opts.jobs)
    finally:
        _close_own(targets, transports)
    return OpResult(op, compiled.series.name, compiled.series.digest, hosts)


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
    compiled, transports = _prepare(series, targets, opts)
    try:
        if len(transports) == 1:
            hosts = [run_on(compiled, transports[0], "apply", opts)]
        else:
            hosts = _fleet_apply(compiled, transports, opts)
    finally:
        _close_own(targets, transports)
    return OpResult("apply", compiled.series.name, compiled.series.digest, hosts)


def _fleet_apply(compiled: Compiled, transports: list[Transport], opts: Options) -> list[HostResult]:
    staged = _each(transports, lambda t: run_on(compiled, t, "apply", opts, phase="stage"), opts.jobs)
    if not all(h.ok for h in staged):
        def undo(pair):
            t, h = pair
            if h.ok and h.state == "staged":
                u = run_on(compiled, t, "unstage", opts)
                h.journal = u.journal
                h.messages.append("staged files removed (another host failed)" if u.ok
                                  else f"could not remove staged files: {'; '.join(u.messages)}")
                h.state = "pristine" if u.ok else "staged"
                h.exit_code = EXIT_REFUSED
                h.messages.append("not applied: the fleet is all-or-nothing")
            return h
        return _each(list(zip(transports, staged)), undo, opts.jobs)
    committed = _each(transports, lambda t: run_on(compiled, t, "commit", opts), opts.jobs)
    for c, s in zip(committed, staged):
        c.elapsed += s.elapsed
        c.bytes_sent += s.bytes_sent
        if s.state == "applied":       # already applied before the fleet run
            c.messages = s.messages
    if all(h.ok for h in committed):
        return committed

    def rollback(pair):
        t, h = pair
        if h.ok:
            r = run_on(compiled, t, "revert", opts)
            h.messages.append("rolled back (another host failed to commit)" if r.ok
                              else f"ROLLBACK FAILED: {'; '.join(r.messages)}")
            h.state = "pristine" if r.ok else "partial"
            h.exit_code = EXIT_REFUSED
            h.written = []
        return h
    return _each(list(zip(transports, committed)), rollback, opts.jobs)
