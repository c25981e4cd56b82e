"""From what a target program answered to the host's verdict: its state, exit code, files and
messages (one host; the fleet logic that combines hosts stays in patchkit.ops).

The answer is typed (patchkit.engine.answer: Flag, Manifest); the verdict's state is a
HostState, each file's a FileState. Both are StrEnums, so JSON output and comparisons with the
plain strings of the public format ("applied", "pristine", ...) are unchanged.

One vocabulary for a target, whichever operation looked (status, check, verify, apply, revert):
pristine (the pinned text, no patchkit state), applied, partial (some files applied),
modified (an applied target edited after apply) and drifted (not the pinned text, before any
apply). A file is pristine, applied, modified or drifted in the same sense.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from patchkit.engine.answer import Answer, Flag, ManifestFile, TargetFile
from patchkit.engine.drift import HunkDrift, explain_file, first_in_series
from patchkit.engine.targetprog import Compiled
from patchkit.errors import EXIT_INVALID, EXIT_OK, EXIT_REFUSED
from patchkit.paths import strip_prefix


class HostState(StrEnum):
    """What a host is in after an operation (``HostResult.state``): the target's state, one of
    TARGET_STATES, wherever the operation learnt it; else what stopped the operation."""

    PRISTINE = "pristine"  # the pinned text, no patchkit state
    APPLIED = "applied"  # every file of the series applied
    PARTIAL = "partial"  # some files applied (an interrupted operation, a failed rollback)
    MODIFIED = "modified"  # applied, then edited (or a patched file deleted) after apply
    DRIFTED = "drifted"  # not the pinned text, before any apply (another release, an edit)
    # not a state of the target's files: what an operation ended in
    STAGED = "staged"  # a fleet's first phase: staged, not committed
    LOCKED = "locked"  # another operation holds the target's lock
    REFUSED = "refused"  # refused before the files were read (wrong release, ...)
    OK = "ok"  # unlock, which reads no file
    UNREACHABLE = "unreachable"  # the transport failed
    ERROR = "error"  # invalid input found on the way
    UNKNOWN = "unknown"


TARGET_STATES = (
    HostState.PRISTINE,
    HostState.APPLIED,
    HostState.PARTIAL,
    HostState.MODIFIED,
    HostState.DRIFTED,
)


class FileState(StrEnum):
    """``FileReport.state``: a file in the words of HostState, or what an operation did to it."""

    PRISTINE = "pristine"  # the pinned text (a file the series creates: absent)
    APPLIED = "applied"
    MODIFIED = "modified"  # edited or deleted after apply
    DRIFTED = "drifted"  # not the pinned text: edited, another release, missing, or (a file the series creates) already there
    STAGED = "staged"  # a fleet's first phase
    BAD_RESULT = "bad-result"  # the staged result failed its check (nothing written)
    RESTORED = "restored"  # revert: the original is back
    REMOVED = "removed"  # revert: a file the series created is gone


@dataclass
class FileReport:
    path: str
    state: str  # a FileState
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
        _carried_state(host, ans)
    prefix = compiled.series.pin.package_prefix if ans.layout == "installed" else None
    restored = {idx for idx, _ in ans.restored}
    if ans.mfiles and op in ("revert", "apply"):
        for i, mf in sorted(ans.mfiles.items()):
            if i in restored:
                host.files.append(
                    FileReport(mf.path, FileState.RESTORED if mf.kind != "create" else FileState.REMOVED)
                )
            else:
                host.files.append(manifest_file(mf))
    inconsistent = []
    for k in range(1, len(plans) + 1):
        tf = ans.files.get(k)
        if tf is None:
            continue
        fr, why = _file_report(compiled, ans, k, tf, prefix)
        if why:
            inconsistent.append(why)
        if fr.state != FileState.PRISTINE or why or op in ("check", "verify"):
            host.files.append(fr)
    if inconsistent:  # the series is at fault, not the target: invalid input, said first
        host.messages[:0] = inconsistent
        host.exit_code = max(host.exit_code, EXIT_INVALID)
    _staged_and_written(host, ans, plans, prefix)
    _settle(host, ans, op, inconsistent=bool(inconsistent))
    return host


def manifest_file(mf: ManifestFile) -> FileReport:
    """A file the target's manifest records, in FileState's words (the target program says
    original, applied, modified, missing)."""
    if mf.state == "missing":
        return FileReport(mf.path, FileState.MODIFIED, "deleted after apply")
    if mf.state in ("original", "absent"):
        return FileReport(mf.path, FileState.PRISTINE)
    return FileReport(mf.path, mf.state)


def manifest_state(ans: Answer) -> HostState:
    """The target's state from the files its manifest records (status, and check or verify on
    a target that carries patchkit state)."""
    assert ans.manifest is not None
    states = [mf.state for mf in ans.mfiles.values()]
    if any(s in ("modified", "missing") for s in states):
        return HostState.MODIFIED
    if all(s == "applied" for s in states):
        return HostState.APPLIED if ans.manifest.state == "applied" else HostState.PARTIAL
    if all(s == "original" for s in states):
        return HostState.PRISTINE
    return HostState.PARTIAL


def _carried_state(host: HostResult, ans: Answer) -> None:
    """check and verify on a target that carries patchkit state: its state and files in
    status's words, since what it holds is no longer the pinned text (an apply, complete or
    not, of this series or another) — or, where every file is its original again (an
    interrupted operation's saved state), a note beside the usual comparison with the pin."""
    assert ans.manifest is not None
    mstate, mseries, mdigest, _ = ans.manifest
    state = manifest_state(ans) if ans.mfiles else None
    if state == HostState.MODIFIED:
        host.messages.append(
            f"files were modified after apply (series {mseries} {mdigest[:12]}; see patch.status); "
            "revert --force keeps them in .patchkit/trash and restores the originals"
        )
    else:
        host.messages.append(
            f"the target carries patchkit state ({mstate}, series {mseries} "
            f"{mdigest[:12]}); see patch.status, then revert"
        )
    if state is not None and state != HostState.PRISTINE:
        host.state = state
        host.files += [manifest_file(mf) for _i, mf in sorted(ans.mfiles.items())]


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


def _file_report(
    compiled: Compiled, ans: Answer, k: int, tf: TargetFile, prefix: str | None
) -> tuple[FileReport, str]:
    """One planned file as the target found it: pristine, or drifted (missing, already there
    where the series creates it, its line count or sha256, and each hunk's drift where the
    target sent the text); and, where the file is the pinned text and the series still does not
    fit it, why the series is inconsistent (else "")."""
    plan = compiled.plans[k - 1]
    fr = FileReport(strip_prefix(plan.path, prefix), FileState.PRISTINE)
    if tf.state == "missing":
        fr.state, fr.detail = FileState.DRIFTED, "pinned file does not exist"
        return fr, ""
    if tf.state == "exists":
        fr.state, fr.detail = FileState.DRIFTED, "the series creates this file, but it already exists"
        return fr, ""
    pinned = plan.pinned
    if pinned and tf.sha == pinned.sha256 and tf.wc != pinned.lines:
        fr.detail = f"sha256 as pinned, wc -l {tf.wc}"
        return fr, (
            f"this series is inconsistent: pin.toml gives {fr.path} the sha256 of a file of "
            f"{tf.wc} lines (wc -l), but says lines = {pinned.lines}"
        )
    problems = []
    if pinned and tf.wc != pinned.lines:
        problems.append(f"wc -l {tf.wc}, pinned {pinned.lines}")
    if pinned and tf.sha != pinned.sha256:
        problems.append(f"sha256 {(tf.sha or '?')[:12]}…, pinned {pinned.sha256[:12]}…")
    if problems:
        fr.state, fr.detail = FileState.DRIFTED, "; ".join(problems)
    drifts: list[HunkDrift] = []
    if k in ans.dumps:
        detailed = compiled.detailed_plan(k)
        drifts = [d for d in explain_file(detailed, ans.dumps[k]) if d.status != "in-place"]
    if not problems and pinned and k in ans.dumps:
        # The file is the pinned text (sha256, wc -l): a hunk that does not fit it is the series' fault.
        fr.hunks = [str(d) for d in drifts]
        fr.detail = "; ".join([f"sha256 and wc -l as pinned; {_hunks(len(drifts))}"] + fr.hunks)
        return fr, _inconsistent(fr.path, drifts)
    if drifts:
        fr.state = FileState.DRIFTED
        fr.hunks = [str(d) for d in drifts]
        fr.detail = "; ".join(filter(None, [fr.detail] + fr.hunks))
    return fr, ""


def _net(n: int) -> str:
    """Lines added (n > 0) or removed (n < 0) in words."""
    count = f"{abs(n)} line{'' if abs(n) == 1 else 's'}"
    return "add no lines" if n == 0 else f"add {count}" if n > 0 else f"remove {count}"


def _hunks(n: int) -> str:
    if n == 0:
        return "the series' hunks do not fit it"
    return "1 hunk of the series does not fit it" if n == 1 else f"{n} hunks of the series do not fit it"


def _inconsistent(path: str, drifts: list[HunkDrift]) -> str:
    """Why a series does not apply to its own pinned text, naming the hunk it meets first."""
    if not drifts:  # the hunks' lines differ only where no explanation reaches (a final newline)
        return (
            f"this series is inconsistent: its hunks' lines do not match the pinned upstream {path}, "
            "which the target holds (sha256 and wc -l as pinned)"
        )
    first = first_in_series(drifts)
    said = (
        f"this series is inconsistent: hunk {first.number} of {first.patch} ({first.header}) does not "
        f"match the pinned upstream {path}, which the target holds (sha256 and wc -l as pinned)"
    )
    if first.status == "moved" and first.start:
        # the header's line, less the lines the patches before it add above, is the pinned line
        added, counted = first.start - first.pinned_at, first.start - first.found_at
        said += (
            f": its lines are at line {first.found_at} of that file, but the patches before it "
            f"{_net(added)} above them, where its header (line {first.start}) counts on "
            f"{counted if counted > 0 else 'none' if counted == 0 else f'{-counted} removed'}"
        )
    return said


def _staged_and_written(host: HostResult, ans: Answer, plans: list, prefix: str | None) -> None:
    """Staged results that failed their check, the files written or restored, and what the
    operation did on the way (a rollback of an interrupted one, files kept, bytecode removed)."""
    for k, (wc, _sha, ok) in sorted(ans.staged.items()):
        if not ok:
            shown = strip_prefix(plans[k - 1].path, prefix)
            host.files.append(
                FileReport(shown, FileState.BAD_RESULT, f"sed produced an unexpected result (wc -l {wc})")
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


def _settle(host: HostResult, ans: Answer, op: str, inconsistent: bool = False) -> None:
    """The host's state after the operation: from what refused it on failure, else from the op
    (an apply lists the files it wrote, a revert that found nothing says so). A state already
    known (check or verify on a target carrying patchkit state) stays."""
    if host.state != HostState.UNKNOWN:
        return
    if host.exit_code != EXIT_OK:
        if Flag.ROLLED_BACK in ans.flags:
            host.state = HostState.PRISTINE  # the commit failed and rolled itself back
        elif any(f.state == FileState.MODIFIED for f in host.files):
            host.state = HostState.MODIFIED
        elif any(f.state == FileState.DRIFTED for f in host.files):
            host.state = HostState.DRIFTED
        elif inconsistent and not ans.lock:
            host.state = HostState.PRISTINE  # the target is the pinned text; the series is not
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
        host.files += [manifest_file(mf) for _i, mf in sorted(ans.mfiles.items())]
        mstate, mseries, mdigest, _ = ans.manifest
        if mdigest != compiled.series.digest:
            host.messages.append(
                f"carries series {mseries} version {mdigest[:12]}, not {compiled.series.digest[:12]}"
            )
        host.state = manifest_state(ans)
        if host.state == HostState.PRISTINE:
            host.messages.append(f"interrupted {mstate} left saved state; revert or apply cleans it")
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
            what = (
                "pinned file does not exist" if tf.state == "missing" else "the series creates it; it exists"
            )
            host.files.append(FileReport(path, FileState.DRIFTED, what))
        elif plan.pinned and (tf.sha != plan.pinned.sha256 or tf.wc != plan.pinned.lines):
            drift = True
            host.files.append(
                FileReport(path, FileState.DRIFTED, f"sha256 {(tf.sha or '?')[:12]}…, wc -l {tf.wc}")
            )
        else:
            host.files.append(FileReport(path, FileState.PRISTINE))
    host.state = HostState.DRIFTED if drift or (ans.errors and not ans.files) else HostState.PRISTINE
