"""Parse what the target program printed ("@pk ..." lines, numbered dumps) into plain data.

The protocol is closed: every ``@pk`` line is either a known word with fields (``file``,
``manifest``, ``lock`` ...) or one of the known flags (``Flag``). Any other ``@pk`` line means
this client and the program it sent disagree, and is refused as a ProtocolError that names
the line; it is never taken as a flag nobody reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from patchkit.errors import Refused


class ProtocolError(Refused):
    """The target program printed a line this client does not know (exit code 1)."""


class Flag(StrEnum):
    """The target program's one-line answers without fields (target.sh ``pk_out``)."""

    FILES_OK = "files ok"  # the bulk check found every file as pinned
    RETRY_SINGLE = "retry single"  # redo with one sed per file
    ALREADY_APPLIED = "already applied"
    JOURNAL_KEPT = "journal-kept"
    RECOVERED = "recovered interrupted"  # an interrupted operation was rolled back
    ROLLED_BACK = "rolled back"  # a failed commit rolled itself back
    STAGED_OK = "staged ok"
    STAGE_VERIFIED = "stage verified"
    UNSTAGED = "unstaged"
    NOTHING_TO_REVERT = "nothing to revert"
    LEFTOVER_STAGE = "leftover stage"
    UNLOCKED = "unlocked"


# ``@pk step WORD``: how far the program got, each step said as it begins: ``lock`` (it holds
# .patchkit/lock), ``stage`` (apply: .patchkit/stage, then .patchkit/orig and a manifest
# ``staged``), ``hold`` (a commit, restore or unstage that an interrupt no longer cuts short)
STEPS = ("lock", "stage", "hold")


class Manifest(NamedTuple):
    """``@pk manifest STATE SERIES DIGEST COUNT``: the patchkit state a target carries."""

    state: str  # applied | applying | reverting | ...
    series: str
    digest: str
    file_count: int  # files recorded (not `count`, which would shadow tuple.count)


@dataclass
class TargetFile:
    state: str  # present | missing | exists
    wc: int | None = None
    sha: str | None = None
    prex: str | None = None


@dataclass
class ManifestFile:
    kind: str
    state: str  # original | applied | modified | missing | absent
    sha: str | None
    orig_sha: str | None
    path: str


@dataclass
class LockInfo:
    state: str  # dead | held | foreign | noowner
    reason: str  # pid-gone | zombie | pid-reused | rebooted | other-host | ... | -
    age: int  # seconds since the owner took it
    owner: dict[str, str]  # pid, host, user, op, time, start, boot, ns, machine (as recorded)

    @property
    def owner_text(self) -> str:
        return " ".join(f"{k}={self.owner[k]}" for k in ("pid", "host", "user", "op") if k in self.owner)


def _lock_info(state: str, reason: str, age: str, line: list[str]) -> LockInfo:
    owner = dict(kv.split("=", 1) for kv in line if "=" in kv)
    return LockInfo(state, reason, _int(age) or 0, owner)


@dataclass
class Answer:
    errors: list[tuple[int, str]] = field(default_factory=list)
    flags: set[Flag] = field(default_factory=set)
    layout: str | None = None
    git_head: str | None = None
    dists: list[tuple[str, str]] = field(default_factory=list)
    files: dict[int, TargetFile] = field(default_factory=dict)
    dumps: dict[int, list[bytes]] = field(default_factory=dict)
    staged: dict[int, tuple[int, str, bool]] = field(default_factory=dict)
    manifest: Manifest | None = None
    mfiles: dict[int, ManifestFile] = field(default_factory=dict)
    lock: LockInfo | None = None  # a lock that refused us (or, for status, any)
    takeover: LockInfo | None = None  # a dead owner's lock this operation took over
    journal: list[str] = field(default_factory=list)
    wrote: list[int] = field(default_factory=list)
    restored: list[tuple[int, str]] = field(default_factory=list)
    trashed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    bytecode: list[str] = field(default_factory=list)  # revert: .pyc files it removed
    leftovers: list[tuple[str, str]] = field(default_factory=list)  # status: (what, path) left behind
    commit_failed: str | None = None  # where a commit failed (then rolled back)
    pid: int | None = None  # the target program's process id (whom an interrupt is sent to)
    steps: list[str] = field(default_factory=list)  # lock, stage, hold: how far it got (Step)
    interrupted: int | None = None  # it was signalled and cleaned up: its exit code (129/130/143)


def _int(s: str) -> int | None:
    try:
        return int(s)
    except ValueError:
        return None


def _read_dump(lines: list[bytes], i: int) -> tuple[list[bytes], int]:
    """A file's text as the target dumped it, from lines[i] to its ``@pk enddump``: the lines
    (each sent after its number), and the index after the dump."""
    numbered: list[bytes] = []
    while i < len(lines):
        cur = lines[i]
        if cur == b"@pk enddump":
            i += 1
            break
        if cur == b"":
            i += 1
            continue
        # a line number, then the line itself
        numbered.append(lines[i + 1] if i + 1 < len(lines) else b"")
        i += 2
    return numbered, i


def parse_answer(stdout: bytes) -> Answer:
    ans = Answer()
    lines = stdout.split(b"\n")
    i = 0
    while i < len(lines):
        raw = lines[i]
        i += 1
        if not raw.startswith(b"@pk "):
            continue
        line = raw[4:].decode("utf-8", "surrogateescape")
        word, _, rest = line.partition(" ")
        parts = rest.split(" ")
        if word == "dump":
            ans.dumps[int(parts[0])], i = _read_dump(lines, i)
        elif word == "error":
            ans.errors.append((_int(parts[0]) or 1, " ".join(parts[1:])))
        elif word == "layout":
            ans.layout = parts[0]
        elif word == "git":
            ans.git_head = parts[1] if parts[0] == "head" else None
        elif word == "dist":
            ans.dists.append((parts[0], " ".join(parts[1:])) if parts[0] != "none" else ("", ""))
        elif word == "file":
            k = int(parts[0])
            if parts[1] == "present":
                ans.files[k] = TargetFile(
                    "present", _int(parts[2]), parts[3], None if parts[4] == "-" else parts[4]
                )
            else:
                ans.files[k] = TargetFile(parts[1])
        elif word == "staged" and parts[0] != "ok":
            ans.staged[int(parts[0])] = (int(parts[1]), parts[2], parts[4] == "1")
        elif word == "manifest":
            ans.manifest = Manifest(parts[0], parts[1], parts[2], int(parts[3]))
        elif word == "mfile":
            idx = int(parts[0])
            ans.mfiles[idx] = ManifestFile(
                parts[1],
                parts[2],
                None if parts[3] == "-" else parts[3],
                None if parts[4] == "-" else parts[4],
                " ".join(parts[5:]),
            )
        elif word == "lock":
            ans.lock = _lock_info(parts[0], parts[1], parts[2], parts[3:])
        elif word == "takeover":
            ans.takeover = _lock_info("dead", parts[0], parts[1], parts[2:])
        elif word == "journal":
            ans.journal.append(rest)
        elif word == "pid":
            ans.pid = _int(parts[0])
        elif word == "step" and parts[0] in STEPS:
            ans.steps.append(parts[0])
        elif word == "interrupted":
            ans.interrupted = _int(parts[0])
        elif word == "wrote":
            ans.wrote.append(int(parts[0]))
        elif word == "restored":
            ans.restored.append((int(parts[0]), parts[1]))
        elif word == "warn":
            ans.warnings.append(rest)
        elif word == "bytecode":
            ans.bytecode.append(rest)
        elif word == "leftover" and line != Flag.LEFTOVER_STAGE:  # that one is a Flag
            ans.leftovers.append((parts[0], " ".join(parts[1:])))
        elif word == "trashed":
            ans.trashed.append(" ".join(parts[1:]))
        elif line.startswith("commit failed in "):
            ans.commit_failed = line[len("commit failed in ") :]
        elif line in Flag.__members__.values():
            ans.flags.add(Flag(line))
        else:
            shown = raw.decode("utf-8", "backslashreplace")
            raise ProtocolError(
                f"the target program printed an unknown line: {shown!r} (this "
                "patchkit and the program it sent disagree); what it did is not "
                "known here: see patch.status"
            )
    return ans
