"""Relocating one file's hunks onto a new upstream text by exact match (the core of rebase).

Pure functions over lines, no I/O. A line is ``(text, eol)``: its bytes without the newline and
whether a newline ends it, so that "\\ No newline at end of file" is part of the comparison.

For each hunk, its *block* (context and removed lines, in order) is searched in the new text:
  exactly one match  -> relocated there (``moved`` by N lines, or ``unchanged``);
  none or several    -> ``needs-attention``; nothing is guessed. The report gets the candidates
                        (where the block occurs, or where most of its lines line up).
With ``context_trim`` a block that matches nowhere is retried with outer context lines dropped,
fewest first; it is accepted only when, at that trim level, every trimmed block that matches
exactly once points at the same place. The dropped context lines are then refilled from the new
text, so the written hunk carries full context again.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field

from patchkit.engine.diffparse import DiffLine, Hunk
from patchkit.engine.drift import find_block

Line = tuple[bytes, bool]


def split_lines(data: bytes) -> list[Line]:
    parts = data.split(b"\n")
    lines = [(p, True) for p in parts[:-1]]
    if parts[-1]:
        lines.append((parts[-1], False))
    return lines


def join_lines(lines: list[Line]) -> bytes:
    return b"".join(text + (b"\n" if eol else b"") for text, eol in lines)


def block_of(hunk: Hunk) -> list[Line]:
    return [(ln.text, ln.eol) for ln in hunk.source]


def outer_context(hunk: Hunk) -> tuple[int, int]:
    """(leading, trailing) context lines: those before the first and after the last change."""
    tags = [ln.tag for ln in hunk.lines]
    if all(t == " " for t in tags):
        return len(tags), 0
    lead = next(i for i, t in enumerate(tags) if t != " ")
    trail = next(i for i, t in enumerate(reversed(tags)) if t != " ")
    return lead, trail


@dataclass
class Candidate:
    line: int  # 1-based line of the new text where the block would start
    matching: int  # lines of the block equal there
    of: int

    def __str__(self) -> str:
        if self.matching == self.of:
            return f"line {self.line} (all {self.of} lines match)"
        return f"line {self.line} ({self.matching} of {self.of} lines match)"


@dataclass
class Placement:
    """Where one hunk goes in the new text, or why it could not be placed."""

    hunk: Hunk
    index: int | None = None  # 0-based start of the (possibly refilled) block
    lines: list[DiffLine] | None = None  # the hunk's lines to write; None: not placed
    trimmed: tuple[int, int] | None = None  # (leading, trailing) context lines dropped to match
    reason: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    merged: str = ""  # set when a checked 3-way merge placed it (merge3)
    structural: str = ""  # set when placed by structure (structural.py)

    @property
    def ok(self) -> bool:
        return self.lines is not None

    @property
    def body(self) -> list[DiffLine]:
        """``lines`` of a placed hunk."""
        assert self.lines is not None, "a placed hunk"
        return self.lines

    @property
    def start(self) -> int:
        """``index`` of a placed hunk."""
        assert self.index is not None, "a placed hunk"
        return self.index

    @property
    def end(self) -> int:
        """The 0-based index just past the text lines a placed hunk covers."""
        assert self.index is not None and self.lines is not None, "a placed hunk"
        return self.index + sum(1 for ln in self.lines if ln.tag != "+")


def next_start(placements: list[Placement], i: int, pending: dict, start_of, total: int) -> int:
    """The first line taken by a hunk after hunk i: a placed one's start, or for a hunk about to
    be placed (its key in `pending`) start_of(pending[j]); `total` when none follows."""
    later = [
        q.start if q.ok else start_of(pending[j])
        for j, q in enumerate(placements)
        if j > i and (q.ok or j in pending)
    ]
    return min(later) if later else total


def in_order(placements: list[Placement], pending: dict) -> Iterator[tuple[int, Placement, int]]:
    """(i, its placement, the end of the last placed hunk before it) for each hunk about to be
    placed (its key in `pending`), in hunk order; one the caller places meanwhile (ok when the
    loop resumes) is the placed hunk before the next."""
    prev_end = 0
    for i, p in enumerate(placements):
        if i in pending:
            yield i, p, prev_end
        if p.ok:
            prev_end = p.end


def best_partial_matches(lines: list[Line], block: list[Line], limit: int = 3) -> list[Candidate]:
    """Starts where at least half of the block lines up with the text, best first."""
    n = len(block)
    if not n or n > len(lines):
        return []
    need = max(1, (n + 1) // 2)
    scored = []
    for i in range(len(lines) - n + 1):
        score = sum(1 for j in range(n) if lines[i + j] == block[j])
        if score >= need:
            scored.append((-score, i))
    scored.sort()
    return [Candidate(i + 1, -s, n) for s, i in scored[:limit]]


def _exact(lines: list[Line], block: list[Line]) -> list[int]:
    return [h - 1 for h in find_block(lines, block)]


def _trim(lines: list[Line], hunk: Hunk, not_before: int) -> Placement | None:
    """Retry with fewer outer context lines; None when no trim level gives one clear place."""
    lead, trail = outer_context(hunk)
    block = block_of(hunk)
    for total in range(1, lead + trail + 1):
        found: dict[int, tuple[int, int, int]] = {}  # change point -> (a, b, block start)
        for a in range(0, min(lead, total) + 1):
            b = total - a
            if b > trail:
                continue
            part = block[a : len(block) - b]
            if not part:
                continue
            hits = _exact(lines, part)
            if len(hits) == 1:
                found.setdefault(hits[0] + (lead - a), (a, b, hits[0]))
        if len(found) > 1:
            return Placement(
                hunk,
                reason=(
                    f"with {total} context line(s) trimmed the block matches at several places "
                    f"({', '.join(str(p + 1) for p in sorted(found))})"
                ),
            )
        if found:
            ((a, b, start),) = found.values()
            return _refill(lines, hunk, a, b, start, not_before)
    return None


def _refill(lines: list[Line], hunk: Hunk, a: int, b: int, start: int, not_before: int) -> Placement:
    """Put back the ``a`` leading / ``b`` trailing dropped context lines from the new text."""
    block_len = len(hunk.source) - a - b
    a_new = min(a, start - not_before)
    b_new = min(b, len(lines) - (start + block_len))
    if a_new < 0:
        return Placement(hunk, reason=f"its trimmed block (line {start + 1}) overlaps the previous hunk")
    body = list(hunk.lines)
    head = [DiffLine(" ", text, eol, 0) for text, eol in lines[start - a_new : start]]
    end = start + block_len
    tail = [DiffLine(" ", text, eol, 0) for text, eol in lines[end : end + b_new]]
    body = head + body[a : len(body) - b] + tail
    return Placement(hunk, index=start - a_new, lines=body, trimmed=(a, b))


def place_hunk(
    lines: list[Line], hunk: Hunk, *, not_before: int = 0, context_trim: bool = False
) -> Placement:
    """Find ``hunk``'s block in ``lines``; ``not_before``: end of the previous hunk (0-based)."""
    block = block_of(hunk)
    if not block:
        return Placement(hunk, reason="the hunk has no context or removed lines to anchor it")
    hits = _exact(lines, block)
    if len(hits) == 1:
        if hits[0] < not_before:
            return Placement(
                hunk,
                reason=(
                    f"its only match (line {hits[0] + 1}) is before the end of the previous hunk "
                    f"(line {not_before}); the order of the code changed"
                ),
            )
        return Placement(hunk, index=hits[0], lines=list(hunk.lines))
    if hits:
        return Placement(
            hunk,
            reason=f"its {len(block)} lines occur {len(hits)} times",
            candidates=[Candidate(h + 1, len(block), len(block)) for h in hits],
        )
    partial = best_partial_matches(lines, block)
    if context_trim:
        trimmed = _trim(lines, hunk, not_before)
        if trimmed is not None:
            if not trimmed.ok:
                trimmed.candidates = partial
            return trimmed
    return Placement(
        hunk, reason=f"its {len(block)} lines (context and removed) occur nowhere", candidates=partial
    )


def place_file(
    lines: list[Line], hunks: list[Hunk], *, context_trim: bool = False, old_lines: list[Line] | None = None
) -> list[Placement]:
    """Place every hunk of one file diff, in order (each after the previous placed one)."""
    out = []
    not_before = 0
    for hunk in hunks:
        p = place_hunk(lines, hunk, not_before=not_before, context_trim=context_trim)
        if p.ok:
            not_before = p.end
        out.append(p)
    return out


def apply_placements(lines: list[Line], placements: list[Placement]) -> list[Line]:
    """The text after the placed hunks (unplaced ones skipped); placements in ascending order."""
    result: list[Line] = []
    cursor = 0
    for p in placements:
        if p.lines is None:
            continue
        result += lines[cursor : p.start]
        result += [(ln.text, ln.eol) for ln in p.lines if ln.tag != "-"]
        cursor = p.end
    return result + lines[cursor:]


def place_at_own_numbers(lines: list[Line], hunks: list[Hunk]) -> list[Placement] | None:
    """Placements where the hunks' headers say, or None unless every hunk matches exactly there."""
    out = []
    for h in hunks:
        index = h.src_begin - 1
        if index < 0 or block_of(h) != lines[index : index + len(h.source)]:
            return None
        out.append(Placement(h, index=index, lines=list(h.lines)))
    return out


def apply_at_own_numbers(lines: list[Line], hunks: list[Hunk]) -> list[Line]:
    """Apply hunks where their headers say (the old series on its own pinned text)."""
    placements = place_at_own_numbers(lines, hunks)
    if placements is None:
        raise ValueError("a hunk does not match at its own line numbers")
    return apply_placements(lines, placements)


def map_line(old: list[Line], new: list[Line], index: int) -> int:
    """Where 0-based ``index`` of ``old`` lands in ``new`` (start of a replaced region)."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if i1 <= index < i2 or (i1 == i2 == index):
            return j1 + (index - i1) if tag == "equal" else j1
    return len(new)


def _text(line: Line) -> str:
    return line[0].decode("utf-8", "replace")


def diff_around(
    old: list[Line],
    new: list[Line],
    lo: int,
    hi: int,
    *,
    labels: tuple[str, str],
    margin: int = 8,
    context: int = 3,
) -> str:
    """Unified diff of ``old`` -> ``new``, only the groups touching old lines [lo-margin, hi+margin)."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    out = []
    for group in matcher.get_grouped_opcodes(context):
        changes = [op for op in group if op[0] != "equal"]
        a0 = min(op[1] for op in changes)
        a1 = max(op[2] for op in changes)
        if a1 < lo - margin or a0 > hi + margin:
            continue
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@\n")
        for tag, a, b, c, d in group:
            if tag == "equal":
                out += [" " + _text(ln) + "\n" for ln in old[a:b]]
                continue
            out += ["-" + _text(ln) + "\n" for ln in old[a:b]]
            out += ["+" + _text(ln) + "\n" for ln in new[c:d]]
    if not out:
        return ""
    return f"--- {labels[0]}\n+++ {labels[1]}\n" + "".join(out)
