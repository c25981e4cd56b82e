"""Operations (check, verify, apply, revert, status) over one target or a fleet.

Each operation is one program per target (see targetprog). A fleet runs hosts in parallel with a
bounded pool; apply on a fleet is two-phase: stage everywhere, commit only when every host staged,
undo everywhere otherwise. A fleet may carry one series per host (PerHostSeries, what
`--series auto` picks on a mixed fleet): each host gets its own program, apply stays two-phase
across all of them, and every HostResult names its series.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from patchkit.engine.answer import Answer, TargetFile, parse_answer
from patchkit.engine.compilecache import compiled_series
from patchkit.engine.drift import explain_file
from patchkit.errors import EXIT_INVALID, EXIT_OK, EXIT_REFUSED, PatchkitError
from patchkit.paths import strip_prefix
from patchkit.engine.series import Series
from patchkit.engine.targetprog import Compiled, build_program
from patchkit.transport import Transport, parse_target
from patchkit.transport.k8s import expand_targets


@dataclass
class FileReport:
    path: str
    state: str
    detail: str = ""


@dataclass
class HostResult:
    target: str
    op: str
    state: str
    exit_code: int
    files: list[FileReport] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    bytes_sent: int = 0
    layout: str | None = None
    lock: dict | None = None          # the lock that refused the operation (status: any lock seen)
    took_over: dict | None = None     # the dead owner's lock this operation took over
    journal: list[dict] = field(default_factory=list)   # revert: the journal it took off the target
    series: str = ""                  # the series this host was given (its own on a mixed fleet)
    digest: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK


@dataclass
class PerHostSeries:
    """One series (folder or Series) per target, in the order of the targets."""

    series: list


PER_HOST = "per-host"    # OpResult.series when the hosts carry different series


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


def interpret(compiled: Compiled, op: str, ans: Answer, rc: int, label: str) -> HostResult:
    plans = compiled.plans
    if "files ok" in ans.flags:       # the bulk check found every file as pinned
        for k, plan in enumerate(plans, 1):
            if plan.kind != "create" and plan.pinned:
                ans.files.setdefault(k, TargetFile("present", plan.pinned.lines, plan.pinned.sha256))
    host = HostResult(target=label, op=op, state="unknown", exit_code=EXIT_OK, layout=ans.layout)
    for code, msg in ans.errors:
        host.messages.append(msg)
        host.exit_code = max(host.exit_code, code if code in (1, 2) else EXIT_REFUSED)
    if rc == 1:
        host.exit_code = max(host.exit_code, EXIT_REFUSED)
    elif rc != 0:
        host.exit_code = EXIT_REFUSED
    pin = compiled.series.pin
    if ans.git_head is not None and pin.commit and ans.git_head != pin.commit:
        host.messages.append(f"git HEAD is {ans.git_head}, pinned commit is {pin.commit}")
    if ans.dists and pin.version and not any(v in pin.versions for v, _ in ans.dists):
        found = ", ".join(f"{v} ({d})" for v, d in ans.dists if d) or "no dist-info found"
        host.messages.append(f"installed {pin.name} version: {found}; pinned {' or '.join(pin.versions)}")
    if ans.takeover:
        host.took_over = _lock_json(ans.takeover)
        host.messages.append(_takeover_message(ans.takeover))
    if ans.lock:
        host.lock = _lock_json(ans.lock)
        host.messages.append(_lock_message(ans.lock, label))
    host.journal = [_journal_entry(line) for line in ans.journal]
    if "journal-kept" in ans.flags:
        host.messages.append("journal kept on the target in .patchkit/journal (--keep-journal)")
    host.messages += ans.warnings
    if "already applied" in ans.flags:
        host.state = "applied"
        host.messages.append("already applied: nothing to do, nothing written")
        return host
    if op == "status":
        if rc == 0:
            host.exit_code = EXIT_OK     # problems found are the answer, not a failure
        _status(compiled, ans, host)
        return host
    if ans.manifest is not None and op in ("check", "verify"):
        mstate, mseries, mdigest, _ = ans.manifest
        host.messages.append(f"the target carries patchkit state ({mstate}, series {mseries} "
                             f"{mdigest[:12]}); see patch.status, then revert")
    prefix = compiled.series.pin.package_prefix if ans.layout == "installed" else None
    restored = {idx for idx, _ in ans.restored}
    if ans.mfiles and op in ("revert", "apply"):
        for i, mf in sorted(ans.mfiles.items()):
            state = ("restored" if mf.kind != "create" else "removed") if i in restored else mf.state
            host.files.append(FileReport(mf.path, state))
    for k, plan in enumerate(plans, 1):
        tf = ans.files.get(k)
        if tf is None:
            continue
        fr = FileReport(strip_prefix(plan.path, prefix), "ok")
        if tf.state == "missing":
            fr.state, fr.detail = "missing", "pinned file does not exist"
        elif tf.state == "exists":
            fr.state, fr.detail = "exists", "the series creates this file, but it already exists"
        else:
            problems = []
            if plan.pinned and tf.wc != plan.pinned.lines:
                problems.append(f"wc -l {tf.wc}, pinned {plan.pinned.lines}")
            if plan.pinned and tf.sha != plan.pinned.sha256:
                problems.append(f"sha256 {tf.sha[:12]}…, pinned {plan.pinned.sha256[:12]}…")
            if problems:
                fr.state, fr.detail = "drifted", "; ".join(problems)
            if k in ans.dumps:
                detailed = compiled.detailed_plan(k)
                drifts = [d for d in explain_file(detailed, ans.dumps[k]) if d.status != "in-place"]
                if drifts:
                    fr.state = "drifted"
                    fr.detail = "; ".join(filter(None, [fr.detail] + [str(d) for d in drifts]))
        if fr.state != "ok" or op in ("check", "verify"):
            host.files.append(fr)
    for k, (wc, sha, ok) in sorted(ans.staged.items()):
        if not ok:
            shown = strip_prefix(plans[k - 1].path, prefix)
            host.files.append(FileReport(shown, "bad-result",
                                         f"sed produced an unexpected result (wc -l {wc})"))
            host.messages.append(f"{shown}: the staged result failed its check; nothing written")
    host.written = [strip_prefix(plans[k - 1].path, prefix) for k in ans.wrote]
    for idx, what in ans.restored:
        mf = ans.mfiles.get(idx)
        host.written.append(mf.path if mf else f"#{idx}")
    if "recovered interrupted" in ans.flags:
        host.messages.append("an interrupted operation was rolled back before applying")
    for t in ans.trashed:
        host.messages.append(f"modified file kept as {t}")
    if host.exit_code != EXIT_OK:
        if "rolled back" in ans.flags:
            host.state = "pristine"          # the commit failed and rolled itself back
        elif any(f.state == "modified" for f in host.files):
            host.state = "modified"
        elif any(f.state in ("drifted", "missing", "exists") for f in host.files):
            host.state = "drifted"
        else:
            host.state = "locked" if ans.lock else "refused"
    elif op in ("apply", "commit"):
        host.state = "staged" if "staged ok" in ans.flags else "applied"
        if not host.files:
            host.files = [FileReport(path, host.state) for path in host.written]
    elif op == "revert":
        host.state = "pristine"
        if "nothing to revert" in ans.flags:
            host.messages.append("nothing to revert: no patchkit state on this target")
    elif op in ("check", "verify"):
        host.state = "pristine"
    else:
        host.state = "ok"
    return host


_DEATH = {"pid-gone": "its process is gone", "zombie": "its process is a zombie",
          "pid-reused": "its pid now belongs to another process", "rebooted": "the host rebooted since"}
_UNKNOWN = {"other-host": "it was taken on another host", "other-machine": "another machine of that name",
            "other-boot": "a boot of this host name that patchkit cannot tie to this machine",
            "other-pid-namespace": "another pid namespace (container)",
            "taking-over": "that operation is taking over a dead lock right now"}


def _lock_json(lock) -> dict:
    return {"state": lock.state, "reason": lock.reason, "age_s": lock.age, "owner": lock.owner}


def _takeover_message(lock) -> str:
    return (f"took over the lock of a dead operation ({lock.owner_text}, {lock.age} s old): "
            f"{_DEATH.get(lock.reason, lock.reason)}")


def _lock_message(lock, label: str) -> str:
    owner, age = lock.owner_text, lock.age
    if lock.state == "dead":      # status only: operations take such a lock over
        return (f"lock of a dead operation {owner} ({age} s ago; {_DEATH.get(lock.reason, lock.reason)}); "
                "the next apply or revert takes it over")
    if lock.state == "held":
        return f"locked by {owner} ({age} s ago; that process is alive): wait for it to finish"
    unlock = f"invoke patch.unlock --target {label!r}"
    if lock.state == "noowner":
        return f"locked, no owner recorded; if no patchkit operation runs there: {unlock}"
    why = _UNKNOWN.get(lock.reason, lock.reason)
    return (f"locked by {owner} ({age} s ago; {why}: patchkit cannot tell whether it is alive); "
            f"once you know it is gone: {unlock}")


def _journal_entry(line: str) -> dict:
    """`<epoch> <op> <event> <series> [detail]`, as target.sh appends them."""
    parts = line.split(" ", 4)
    parts += [""] * (5 - len(parts))
    when = int(parts[0]) if parts[0].isdigit() else None
    return {"time": when, "op": parts[1], "event": parts[2], "series": parts[3], "detail": parts[4]}


def _status(compiled: Compiled, ans: Answer, host: HostResult) -> None:
    plans = compiled.plans
    if ans.manifest is not None:
        states = []
        for i, mf in sorted(ans.mfiles.items()):
            host.files.append(FileReport(mf.path, mf.state))
            states.append(mf.state)
        mstate, mseries, mdigest, _ = ans.manifest
        if mdigest != compiled.series.digest:
            host.messages.append(f"carries series {mseries} version {mdigest[:12]}, not {compiled.series.digest[:12]}")
        if any(s in ("modified", "missing") for s in states):
            host.state = "modified"
        elif all(s == "applied" for s in states):
            host.state = "applied" if mstate == "applied" else "partial"
        elif all(s == "original" for s in states):
            host.state = "pristine"
            host.messages.append(f"interrupted {mstate} left saved state; revert or apply cleans it")
        else:
            host.state = "partial"
        return
    drift = False
    prefix = compiled.series.pin.package_prefix if ans.layout == "installed" else None
    for k, plan in enumerate(plans, 1):
        tf = ans.files.get(k)
        if tf is None:
            continue
        path = strip_prefix(plan.path, prefix)
        if tf.state != "present":
            drift = True
            host.files.append(FileReport(path, tf.state))
        elif plan.pinned and (tf.sha != plan.pinned.sha256 or tf.wc != plan.pinned.lines):
            drift = True
            host.files.append(FileReport(path, "drifted", f"sha256 {tf.sha[:12]}…, wc -l {tf.wc}"))
        else:
            host.files.append(FileReport(path, "pristine"))
    host.state = "drifted" if drift or (ans.errors and not ans.files) else "pristine"


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

def _prepare(series: Series | str | PerHostSeries, targets: list[str], opts: Options,
             full: bool = True):
    """(one Compiled per target, one Transport per target)."""
    if not targets:
        raise PatchkitError("no --target given (and none in invoke.yaml)", EXIT_INVALID)
    # k8s:NS/SELECTOR:ROOT becomes one target per running pod before any fleet logic
    targets = expand_targets(targets, container=opts.container, exec_prefix=opts.exec_prefix,
                             **opts.transport_options)
    if isinstance(series, PerHostSeries):
        if len(series.series) != len(targets):
            raise PatchkitError(f"{len(series.series)} series for {len(targets)} targets",
                                EXIT_INVALID)
        made: dict = {}
        compileds = []
        for s in series.series:
            k = id(s) if isinstance(s, Series) else str(s)
            if k not in made:
                made[k] = compiled_series(s, full=full)
            compileds.append(made[k])
    else:
        compileds = [compiled_series(series, full=full)] * len(targets)
    transports = [t if isinstance(t, Transport) else
                  parse_target(t, cwd=opts.cwd, container=opts.container,
                               exec_prefix=opts.exec_prefix, **opts.transport_options)
                  for t in targets]
    return compileds, transports


def _result(op: str, compileds: list[Compiled], hosts: list[HostResult]) -> OpResult:
    """The answer; each host names its series, the whole names one or says per-host."""
    for c, h in zip(compileds, hosts):
        h.series, h.digest = c.series.name, c.series.digest
    if len({c.series.digest for c in compileds}) > 1:
        return OpResult(op, PER_HOST, "", hosts)
    return OpResult(op, compileds[0].series.name, compileds[0].series.digest, hosts)


def _each(transports, fn, jobs: int) -> list[HostResult]:
    if len(transports) == 1:
        return [fn(transports[0])]
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(transports)))) as pool:
        return list(pool.map(fn, transports))


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
        if op == "status":      # e.g. whether an SSH master is alive for the next command
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


def _fleet_apply(compileds: list[Compiled], transports: list[Transport],
                 opts: Options) -> list[HostResult]:
    """Stage on every host (each with its own series' program), commit only when all staged."""
    compiled_of = {id(t): c for c, t in zip(compileds, transports)}
    staged = _each(transports, lambda t: run_on(compiled_of[id(t)], t, "apply", opts, phase="stage"),
                   opts.jobs)
    if not all(h.ok for h in staged):
        def undo(pair):
            t, h = pair
            if h.ok and h.state == "staged":
                u = run_on(compiled_of[id(t)], t, "unstage", opts)
                h.journal = u.journal
                h.messages.append("staged files removed (another host failed)" if u.ok
                                  else f"could not remove staged files: {'; '.join(u.messages)}")
                h.state = "pristine" if u.ok else "staged"
                h.exit_code = EXIT_REFUSED
                h.messages.append("not applied: the fleet is all-or-nothing")
            return h
        return _each(list(zip(transports, staged)), undo, opts.jobs)
    committed = _each(transports, lambda t: run_on(compiled_of[id(t)], t, "commit", opts),
                      opts.jobs)
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
            r = run_on(compiled_of[id(t)], t, "revert", opts)
            h.messages.append("rolled back (another host failed to commit)" if r.ok
                              else f"ROLLBACK FAILED: {'; '.join(r.messages)}")
            h.state = "pristine" if r.ok else "partial"
            h.exit_code = EXIT_REFUSED
            h.written = []
        return h
    return _each(list(zip(transports, committed)), rollback, opts.jobs)
