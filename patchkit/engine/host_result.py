"""From what a target program answered to the host's verdict: its state, exit code, files and
messages (one host; the fleet logic that combines hosts stays in patchkit.ops).

The answer is typed (patchkit.engine.answer: Flag, Manifest); the verdict's state is a
HostState. Both are StrEnums, so JSON output and comparisons with the plain strings of the
public format ("applied", "pristine", ...) are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from patchkit.engine.answer import Answer, Flag, TargetFile
from patchkit.engine.drift import explain_file
from patchkit.engine.targetprog import Compiled
from patchkit.errors import EXIT_OK, EXIT_REFUSED
from patchkit.paths import strip_prefix


class HostState(StrEnum):
    """What a host is in after an operation (``HostResult.state``)."""

    UNKNOWN = "unknown"
    PRISTINE = "pristine"  # the pinned text, no patchkit state
    APPLIED = "applied"
    STAGED = "staged"  # a fleet's first phase: staged, not committed
    PARTIAL = "partial"  # some files applied (an interrupted operation, a failed rollback)
    MODIFIED = "modified"  # changed after apply
    DRIFTED = "drifted"  # not the pinned text
    LOCKED = "locked"
    REFUSED = "refused"
    OK = "ok"  # unlock and other operations without a file state
    UNREACHABLE = "unreachable"  # the transport failed
    ERROR = "error"  # invalid input found on the way


@dataclass
class FileReport:
    path: str
    state: str
    detail: str = ""
    hunks: list[str] = field(default_factory=list)  # drift: one explanation per hunk, in line order


@dataclass
class HostResult:
    target: str
    op: str
    state: str  # a HostState
    exit_code: int
    files: list[FileReport] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    bytes_sent: int = 0
    layout: str | None = None
    lock: dict | None = None  # the lock that refused the operation (status: any lock seen)
    took_over: dict | None = None  # the dead owner's lock this operation took over
    journal: list[dict] = field(default_factory=list)  # revert: the journal it took off the target
    series: str = ""  # the series this host was given (its own on a mixed fleet)
    digest: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK


def interpret(
    compiled: Compiled, op: str, ans: Answer, rc: int, label: str, journal_kept_by: str = "--keep-journal"
) -> HostResult:
    plans = compiled.plans
    if Flag.FILES_OK in ans.flags:  # the bulk check found every file as pinned
        for k, plan in enumerate(plans, 1):
            if plan.kind != "create" and plan.pinned:
                ans.files.setdefault(k, TargetFile("present", plan.pinned.lines, plan.pinned.sha256))
    host = HostResult(target=label, op=op, state=HostState.UNKNOWN, exit_code=EXIT_OK, layout=ans.layout)
    for code, msg in ans.errors:
        host.messages.append(msg)
        host.exit_code = max(host.exit_code, code if code in (1, 2) else EXIT_REFUSED)
    if rc == 1:
        host.exit_code = max(host.exit_code, EXIT_REFUSED)
    elif rc != 0:
        host.exit_code = EXIT_REFUSED
    _release_messages(host, ans, compiled.series.pin)
    _lock_and_journal(host, ans, label, journal_kept_by)
    host.messages += ans.warnings
    if Flag.ALREADY_APPLIED in ans.flags:
        host.state = HostState.APPLIED
        host.messages.append("already applied: nothing to do, nothing written")
        return host
    if op == "status":
        if rc == 0:
            host.exit_code = EXIT_OK  # problems found are the answer, not a failure
        _status(compiled, ans, host)
        return host
    if ans.manifest is not None and op in ("check", "verify"):
        mstate, mseries, mdigest, _ = ans.manifest
        host.messages.append(
            f"the target carries patchkit state ({mstate}, series {mseries} "
            f"{mdigest[:12]}); see patch.status, then revert"
        )
    prefix = compiled.series.pin.package_prefix if ans.layout == "installed" else None
    restored = {idx for idx, _ in ans.restored}
    if ans.mfiles and op in ("revert", "apply"):
        for i, mf in sorted(ans.mfiles.items()):
            state = ("restored" if mf.kind != "create" else "removed") if i in restored else mf.state
            host.files.append(FileReport(mf.path, state))
    for k in range(1, len(plans) + 1):
        tf = ans.files.get(k)
        if tf is None:
            continue
        fr = _file_report(compiled, ans, k, tf, prefix)
        if fr.state != "ok" or op in ("check", "verify"):
            host.files.append(fr)
    _staged_and_written(host, ans, plans, prefix)
    _settle(host, ans, op)
    return host


def _release_messages(host: HostResult, ans: Answer, pin) -> None:
    """Where the target is another release than the pin: its git HEAD, its installed dist."""
    if ans.git_head is not None and pin.commit and ans.git_head != pin.commit:
        host.messages.append(f"git HEAD is {ans.git_head}, pinned commit is {pin.commit}")
    if ans.dists and pin.version and not any(v in pin.versions for v, _ in ans.dists):
        found = ", ".join(v for v, d in ans.dists if d)
        where = ", ".join(d for _, d in ans.dists if d)
        # the useful fact first: it explains every drifted file below it
        host.messages.insert(
            0,
            (f"installed {pin.name} {found}, pinned {' or '.join(pin.versions)}: try --series auto ({where})")
            if found
            else f"no {pin.name} dist-info found; pinned {' or '.join(pin.versions)}",
        )


def _lock_and_journal(host: HostResult, ans: Answer, label: str, journal_kept_by: str) -> None:
    """The lock taken over or refusing, and the journal taken off (or kept on) the target."""
    if ans.takeover:
        host.took_over = _lock_json(ans.takeover)
        host.messages.append(_takeover_message(ans.takeover))
    if ans.lock:
        host.lock = _lock_json(ans.lock)
        host.messages.append(_lock_message(ans.lock, label))
    host.journal = [_journal_entry(line) for line in ans.journal]
    if Flag.JOURNAL_KEPT in ans.flags:
        host.messages.append(f"journal kept on the target in .patchkit/journal ({journal_kept_by})")


def _file_report(compiled: Compiled, ans: Answer, k: int, tf: TargetFile, prefix: str | None) -> FileReport:
    """One planned file as the target found it: ok, missing, already there (a created file) or
    drifted (its line count or sha256, and each hunk's drift where the target sent the text)."""
    plan = compiled.plans[k - 1]
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
            problems.append(f"sha256 {(tf.sha or '?')[:12]}…, pinned {plan.pinned.sha256[:12]}…")
        if problems:
            fr.state, fr.detail = "drifted", "; ".join(problems)
        if k in ans.dumps:
            detailed = compiled.detailed_plan(k)
            drifts = [d for d in explain_file(detailed, ans.dumps[k]) if d.status != "in-place"]
            if drifts:
                fr.state = "drifted"
                fr.hunks = [str(d) for d in drifts]
                fr.detail = "; ".join(filter(None, [fr.detail] + fr.hunks))
    return fr


def _staged_and_written(host: HostResult, ans: Answer, plans: list, prefix: str | None) -> None:
    """Staged results that failed their check, the files written or restored, and what the
    operation did on the way (a rollback of an interrupted one, files kept, bytecode removed)."""
    for k, (wc, _sha, ok) in sorted(ans.staged.items()):
        if not ok:
            shown = strip_prefix(plans[k - 1].path, prefix)
            host.files.append(
                FileReport(shown, "bad-result", f"sed produced an unexpected result (wc -l {wc})")
            )
            host.messages.append(f"{shown}: the staged result failed its check; nothing written")
    host.written = [strip_prefix(plans[k - 1].path, prefix) for k in ans.wrote]
    for idx, _what in ans.restored:
        back = ans.mfiles.get(idx)
        host.written.append(back.path if back else f"#{idx}")
    if Flag.RECOVERED in ans.flags:
        host.messages.append("an interrupted operation was rolled back before applying")
    for t in ans.trashed:
        host.messages.append(f"modified file kept as {t}")
    if ans.bytecode:
        host.messages.append(
            "removed the bytecode compiled from the patched files: " + ", ".join(ans.bytecode)
        )


def _settle(host: HostResult, ans: Answer, op: str) -> None:
    """The host's state after the operation: from what refused it on failure, else from the op
    (an apply lists the files it wrote, a revert that found nothing says so)."""
    if host.exit_code != EXIT_OK:
        if Flag.ROLLED_BACK in ans.flags:
            host.state = HostState.PRISTINE  # the commit failed and rolled itself back
        elif any(f.state == "modified" for f in host.files):
            host.state = HostState.MODIFIED
        elif any(f.state in ("drifted", "missing", "exists") for f in host.files):
            host.state = HostState.DRIFTED
        else:
            host.state = HostState.LOCKED if ans.lock else HostState.REFUSED
    elif op in ("apply", "commit"):
        host.state = HostState.STAGED if Flag.STAGED_OK in ans.flags else HostState.APPLIED
        if not host.files:
            host.files = [FileReport(path, host.state) for path in host.written]
    elif op == "revert":
        host.state = HostState.PRISTINE
        if Flag.NOTHING_TO_REVERT in ans.flags:
            host.messages.append("nothing to revert: no patchkit state on this target")
    elif op in ("check", "verify"):
        host.state = HostState.PRISTINE
    else:
        host.state = HostState.OK


_DEATH = {
    "pid-gone": "its process is gone",
    "zombie": "its process is a zombie",
    "pid-reused": "its pid now belongs to another process",
    "rebooted": "the host rebooted since",
}
_UNKNOWN = {
    "other-host": "it was taken on another host",
    "other-machine": "another machine of that name",
    "other-boot": "a boot of this host name that patchkit cannot tie to this machine",
    "other-pid-namespace": "another pid namespace (container)",
    "taking-over": "that operation is taking over a dead lock right now",
}


def _lock_json(lock) -> dict:
    return {"state": lock.state, "reason": lock.reason, "age_s": lock.age, "owner": lock.owner}


def _takeover_message(lock) -> str:
    return (
        f"took over the lock of a dead operation ({lock.owner_text}, {lock.age} s old): "
        f"{_DEATH.get(lock.reason, lock.reason)}"
    )


def _lock_message(lock, label: str) -> str:
    owner, age = lock.owner_text, lock.age
    if lock.state == "dead":  # status only: operations take such a lock over
        return (
            f"lock of a dead operation {owner} ({age} s ago; {_DEATH.get(lock.reason, lock.reason)}); "
            "the next apply or revert takes it over"
        )
    if lock.state == "held":
        return f"locked by {owner} ({age} s ago; that process is alive): wait for it to finish"
    unlock = f"invoke patch.unlock --target {label!r}"
    if lock.state == "noowner":
        return f"locked, no owner recorded; if no patchkit operation runs there: {unlock}"
    why = _UNKNOWN.get(lock.reason, lock.reason)
    return (
        f"locked by {owner} ({age} s ago; {why}: patchkit cannot tell whether it is alive); "
        f"once you know it is gone: {unlock}"
    )


def _journal_entry(line: str) -> dict:
    """`<epoch> <op> <event> <series> [detail]`, as target.sh appends them."""
    parts = line.split(" ", 4)
    parts += [""] * (5 - len(parts))
    when = int(parts[0]) if parts[0].isdigit() else None
    return {"time": when, "op": parts[1], "event": parts[2], "series": parts[3], "detail": parts[4]}


_LEFTOVER = {
    "trash": "files a forced revert moved aside; delete it once you have looked",
    "bytecode": "bytecode of a file the series creates; delete it",
}


def _status(compiled: Compiled, ans: Answer, host: HostResult) -> None:
    plans = compiled.plans
    for what, path in ans.leftovers:
        host.messages.append(f"left behind: {path} ({_LEFTOVER.get(what, what)})")
    if ans.manifest is not None:
        states = []
        for _i, mf in sorted(ans.mfiles.items()):
            host.files.append(FileReport(mf.path, mf.state))
            states.append(mf.state)
        mstate, mseries, mdigest, _ = ans.manifest
        if mdigest != compiled.series.digest:
            host.messages.append(
                f"carries series {mseries} version {mdigest[:12]}, not {compiled.series.digest[:12]}"
            )
        if any(s in ("modified", "missing") for s in states):
            host.state = HostState.MODIFIED
        elif all(s == "applied" for s in states):
            host.state = HostState.APPLIED if mstate == "applied" else HostState.PARTIAL
        elif all(s == "original" for s in states):
            host.state = HostState.PRISTINE
            host.messages.append(f"interrupted {mstate} left saved state; revert or apply cleans it")
        else:
            host.state = HostState.PARTIAL
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
            host.files.append(FileReport(path, "drifted", f"sha256 {(tf.sha or '?')[:12]}…, wc -l {tf.wc}"))
        else:
            host.files.append(FileReport(path, "pristine"))
    host.state = HostState.DRIFTED if drift or (ans.errors and not ans.files) else HostState.PRISTINE
