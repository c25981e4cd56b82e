"""Render a file plan as line-addressed sed commands (and shell printf for what sed cannot say).

Edits are addressed by line number only — never by pattern — so nothing is searched for:
  * deleted original lines:         `A,Bd`
  * new lines replacing a deletion:  `Bs/.*/NEW1\\<nl>NEW2/`  (the last deleted line of the gap)
  * new lines after a kept line:     `Ks/$/\\<nl>NEW1\\<nl>NEW2/`
  * new lines before the first line: `Ks/^/NEW1\\<nl>NEW2\\<nl>/`
  * new lines at the end of a file:  written by `printf` after sed, which is how the final
    newline (present or not) comes out exactly right under GNU and BusyBox sed alike.
Several files are edited by one sed process: their lines are numbered as one stream (offsets), and
each file's result goes to its own output with `w`. The same commands with offset 0 and `$` as the
last address serve one file alone.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass

from patchkit.engine.plan import FilePlan, Item, is_new, orig_no


def text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def shq(s: str) -> str:
    """Quote for POSIX sh: one single-quoted word."""
    return "'" + s.replace("'", "'\\''") + "'"


def rhs(lines: list[bytes]) -> str:
    """The replacement part of an s command: literal bytes, lines joined by escaped newlines."""
    out = []
    for b in lines:
        s = text(b).replace("\\", "\\\\").replace("&", "\\&").replace("/", "\\/")
        out.append(s)
    return "\\\n".join(out)


def ranges(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def addr(a: int, b: int, offset: int) -> str:
    return f"{a + offset}" if a == b else f"{a + offset},{b + offset}"


def lines_digest(lines: list[tuple[int, bytes, bool]]) -> str:
    h = hashlib.sha256()
    for _, t, eol in lines:
        h.update(t + (b"\n" if eol else b""))
    return h.hexdigest()


def _known(it: int | Item) -> bytes:
    """The content of a line the series adds or a hunk mentions (always known)."""
    assert not isinstance(it, int) and it.text is not None, "a line with known content"
    return it.text


def split_tail(plan: FilePlan) -> tuple[list[int | Item], list[Item]]:
    """Body (edited by sed) and tail (new lines after the last original line, printed by printf)."""
    final = plan.final
    cut = len(final)
    while cut > 0 and is_new(final[cut - 1]):
        cut -= 1
    return final[:cut], final[cut:]


@dataclass
class StageEdit:
    edits: list[tuple[int, int, str]]  # (first line, last line, sed command without address)
    tail: list[Item]  # lines appended with printf after sed

    def shifted(self, offset: int) -> list[str]:
        return [f"{addr(a, b, offset)}{cmd}" for a, b, cmd in self.edits]

    @property
    def commands(self) -> list[str]:
        return self.shifted(0)


def stage_edit(plan: FilePlan) -> StageEdit:
    body, tail = split_tail(plan)
    deleted = set(plan.deleted)
    deleted_sorted = sorted(deleted)
    cmds: list[tuple[int, int, str]] = []
    appends: list[tuple[int, int, str]] = []  # `s/$/…/` must run before `s/^/…/` on one line
    prepends: list[tuple[int, int, str]] = []
    i = 0
    prev_kept: int | None = None
    while i < len(body):
        it = body[i]
        if isinstance(it, int):
            prev_kept = it
            i += 1
            continue
        if it.orig is not None:
            prev_kept = it.orig
            i += 1
            continue
        j = i
        while j < len(body) and is_new(body[j]):
            j += 1
        group = [_known(g) for g in body[i:j]]
        nxt = orig_no(body[j])  # body ends with an original line, so this exists
        assert nxt is not None
        lo = bisect.bisect_right(deleted_sorted, prev_kept or 0)
        hi = bisect.bisect_left(deleted_sorted, nxt)
        gap = deleted_sorted[lo:hi]
        if gap:
            anchor = max(gap)
            deleted.discard(anchor)
            cmds.append((anchor, anchor, f"s/.*/{rhs(group)}/"))
        elif prev_kept is not None:
            appends.append((prev_kept, prev_kept, f"s/$/\\\n{rhs(group)}/"))
        else:
            prepends.append((nxt, nxt, f"s/^/{rhs(group)}\\\n/"))
        i = j
    for a, b in ranges(sorted(deleted)):
        cmds.append((a, b, "d"))
    return StageEdit(edits=cmds + appends + prepends, tail=tail)


def printf_lines(items: list[Item]) -> str:
    """Shell code writing `items` to stdout exactly (printf is a builtin: no process)."""
    if not items:
        return ":"
    parts = []
    full = [it for it in items if it.eol]
    if full:
        words = " ".join(shq(text(_known(it))) for it in full)
        parts.append(f"printf '%s\\n' {words}")
    if not items[-1].eol:
        parts.append(f"printf '%s' {shq(text(_known(items[-1])))}")
    return "; ".join(parts)


def pre_ranges(plan: FilePlan) -> list[tuple[int, int]]:
    cached = plan.__dict__.get("_pre_ranges")
    if cached is None:
        cached = plan.__dict__["_pre_ranges"] = ranges([n for n, _, _ in plan.expected_pre_lines()])
    return cached


def post_ranges(plan: FilePlan) -> list[tuple[int, int]]:
    cached = plan.__dict__.get("_post_ranges")
    if cached is None:
        cached = plan.__dict__["_post_ranges"] = ranges([n for n, _, _ in plan.expected_post_lines()])
    return cached


def dispatch(items: list[tuple[int, int, str]], prefix: str, fanout: int = 16) -> list[str]:
    """Jump each line to its item's label through a tree of range tests.

    sed tests a line against every command in turn; a flat list of thousands of ranges makes a
    large series quadratic. A tree of `lo,hi b label` jumps (ranges sorted and disjoint) costs a
    line about fanout * depth tests. Every range is first tested on its own first line, which keeps
    BusyBox, whose ranges can open late when their first line is skipped, exact.
    """
    out: list[str] = []
    counter = [0]

    def level(chunk: list[tuple[int, int, str]]) -> None:
        if len(chunk) <= fanout:
            out.extend(f"{addr(lo, hi, 0)}b {label}" for lo, hi, label in chunk)
            out.append("d")
            return
        size = -(-len(chunk) // fanout)
        groups = [chunk[i : i + size] for i in range(0, len(chunk), size)]
        labels = []
        for g in groups:
            counter[0] += 1
            labels.append(f"{prefix}{counter[0]}")
            out.append(f"{addr(g[0][0], g[-1][1], 0)}b {labels[-1]}")
        out.append("d")
        for g, label in zip(groups, labels):
            out.append(f":{label}")
            level(g)

    level(items)
    return out


def extraction_script(files: list[tuple[str, list[tuple[int, int]], int]], count_lines: bool) -> str:
    """Copy the given line ranges of each file to its own output.

    `files` holds (output, ranges, offset). Each output gets exactly one `w` command: BusyBox
    opens one handle per command, so two commands naming one file would overwrite each other.
    `$=` prints the stream's line count.
    """
    items, blocks = [], []
    for n, (out, rngs, offset) in enumerate(files, 1):
        if not rngs:
            continue
        items += [(a + offset, b + offset, f"w{n}") for a, b in rngs]
        blocks += [f":w{n}", f"w {out}", "d"]
    head = ["$="] if count_lines else []
    return "\n".join(head + dispatch(items, "x") + blocks)
