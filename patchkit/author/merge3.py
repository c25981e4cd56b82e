"""Relocating a hunk by three-way merge, accepted only when its lines keep their place.

For a hunk that exact matching could not place: git's own merge (``git merge-file``) of
  base   = the old file as the patch saw it,
  ours   = that file with this one hunk applied,
  theirs = the new file (with the earlier rebased patches applied)
gives a merged text. The hunk's new place is read back from it (the difference between the new
file and the merge must be exactly the hunk's removed and added lines), and accepted only when
  - the merge had no conflict,
  - every added line sits, by ``pystructure``, in the same function, in the same branch of the
    same compound statements and between the same two statements as in the old patched file
    (removed lines: as in the old file), and
  - the new file with the hunk compiles.
When git reports one conflict because upstream rewrote the statement next to an inserted run
of lines, every place inside the conflict is tried instead: the one place (blank lines aside)
where the lines keep their function and branch and the same statement on one side, while the
statement on the other side is upstream's rewrite of the old neighbour (the old neighbour's
lines are on the old side of the conflict, the new one on the new side; when the kept side is
only the start or end of the block, the rewrite must also still read like the old statement,
difflib ratio >= 0.6), is accepted if the file compiles; no place, or several different ones,
is a refusal.

In a clean merge, a neighbour that upstream edited in place still counts as the same
statement when the other neighbour is unchanged, both are real statements (not a block's start
or end) and the edited one reads like the old (difflib ratio >= 0.6).

Anything else stays for a person, with the reason. Pure apart from running git on temporary
files; the caller decides what to do with a refusal.
"""

from __future__ import annotations

import difflib
import itertools
import os
import subprocess
import tempfile
from dataclasses import dataclass

from patchkit.author.pystructure import compile_problem, spots
from patchkit.author.relocate import (
    Line,
    Placement,
    apply_placements,
    in_order,
    join_lines,
    next_start,
    split_lines,
)
from patchkit.engine.diffparse import DiffLine, Hunk
from patchkit.errors import Refused

MARKER_SIZE = 40  # conflict markers no source line starts with
MAX_CONFLICT = 400  # new lines of one conflict searched for a place (one parse per line)
SIMILAR = 0.6  # difflib ratio: a rewritten statement that still reads as the old one


class GitMissing(Refused):
    """git is needed for the three-way merge and could not be run."""


def merge_file(ours: bytes, base: bytes, theirs: bytes) -> tuple[bytes, int]:
    """``git merge-file -p ours base theirs``: (merged bytes, number of conflicts)."""
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C")
    with tempfile.TemporaryDirectory(prefix="patchkit-merge-") as tmp:
        names = []
        for name, data in (("patched", ours), ("old", base), ("new", theirs)):
            path = os.path.join(tmp, name)
            with open(path, "wb") as fh:
                fh.write(data)
            names.append(path)
        argv = (
            "git",
            "merge-file",
            "-p",
            "-q",
            "--diff3",
            "--marker-size",
            str(MARKER_SIZE),
            "-L",
            "old patched",
            "-L",
            "old",
            "-L",
            "new",
            *names,
        )
        try:
            proc = subprocess.run(argv, capture_output=True, cwd=tmp, env=env, timeout=120)
        except FileNotFoundError as exc:
            raise GitMissing(
                "the three-way merge needs git on PATH (git merge-file); it could not be started"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise Refused("git merge-file took more than 120 s") from exc
    if proc.returncode < 0 or proc.returncode >= 128:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise Refused(f"git merge-file failed (exit {proc.returncode}): {err}")
    return proc.stdout, proc.returncode


@dataclass
class Merged:
    """A hunk placed by the merge: the changed lines' range in the new text, and the lines."""

    hunk: Hunk
    lo: int  # 0-based first new line the change covers (or inserts at)
    hi: int  # end of the covered new lines (== lo for a pure insertion)
    core: list[DiffLine]  # removed/added lines and the context between them
    proof: str = ""  # what the structural check found, for the report

    def placement(self, lines: list[Line], lead: int, trail: int) -> Placement:
        """A Placement with up to ``lead``/``trail`` context lines from the new text."""
        head = [DiffLine(" ", t, e, 0) for t, e in lines[self.lo - lead : self.lo]]
        tail = [DiffLine(" ", t, e, 0) for t, e in lines[self.hi : self.hi + trail]]
        return Placement(self.hunk, index=self.lo - lead, lines=head + self.core + tail)


def own_placement(hunk: Hunk) -> Placement:
    return Placement(hunk, index=hunk.src_begin - 1, lines=list(hunk.lines))


def changed_lines(p: Placement) -> tuple[list[int], list[int]]:
    """(removed lines in the text before, added lines in the text after), 1-based."""
    assert p.index is not None and p.lines is not None, "a placed hunk"
    removed, added = [], []
    src = tgt = p.index
    for ln in p.lines:
        if ln.tag == " ":
            src += 1
            tgt += 1
        elif ln.tag == "-":
            removed.append(src + 1)
            src += 1
        else:
            added.append(tgt + 1)
            tgt += 1
    return removed, added


def _changes(lines: list[DiffLine]) -> tuple[list[Line], list[Line]]:
    return (
        [(ln.text, ln.eol) for ln in lines if ln.tag == "-"],
        [(ln.text, ln.eol) for ln in lines if ln.tag == "+"],
    )


def read_back(new: list[Line], merged: list[Line], hunk: Hunk) -> Merged | str:
    """Where the merge put the hunk: the one stretch where ``merged`` differs from ``new``."""
    ops = [
        op
        for op in difflib.SequenceMatcher(None, new, merged, autojunk=False).get_opcodes()
        if op[0] != "equal"
    ]
    if not ops:
        return "the merge left the new file as it is (upstream already has this change?)"
    lo, hi = ops[0][1], ops[-1][2]
    core: list[DiffLine] = []
    cursor = lo
    for _tag, i1, i2, j1, j2 in ops:
        core += [DiffLine(" ", t, e, 0) for t, e in new[cursor:i1]]
        core += [DiffLine("-", t, e, 0) for t, e in new[i1:i2]]
        core += [DiffLine("+", t, e, 0) for t, e in merged[j1:j2]]
        cursor = i2
    if _changes(core) != _changes(hunk.lines):
        return "the merge changed other lines than the hunk's own (upstream changed lines the hunk removes?)"
    return Merged(hunk, lo, hi, core)


def edited_neighbour(was, now) -> float | None:
    """How alike the one differing neighbour reads (difflib ratio), when ``now`` keeps
    ``was``'s function, branch and the statement on one side and the statement on the other
    side reads like the old one, edited; None when it does not."""
    if was == now or was.inside or now.inside or (was.scope, was.blocks) != (now.scope, now.blocks):
        return None
    if was.before == now.before:
        old_text, new_text = was.after, now.after
    elif was.after == now.after:
        old_text, new_text = was.before, now.before
    else:
        return None
    if old_text.startswith("<") or new_text.startswith("<"):
        return None  # a block's start or end is not an edited statement
    ratio = difflib.SequenceMatcher(None, old_text, new_text, autojunk=False).ratio()
    return ratio if ratio >= SIMILAR else None


def _spot_problem(
    old_text: bytes,
    old_lines: list[int],
    new_text: bytes,
    new_lines: list[int],
    what: str,
    filename: str,
    edits: list[float] | None = None,
) -> str | None:
    """None when each line keeps its spot (``edits``, when given, collects the ratio of each
    neighbour upstream edited in place, which then counts as kept)."""
    if not old_lines:
        return None
    try:
        before = spots(old_text, old_lines, filename=filename)
    except SyntaxError as exc:
        return f"the old {what} file does not parse (line {exc.lineno}: {exc.msg})"
    try:
        after = spots(new_text, new_lines, filename=filename)
    except SyntaxError as exc:
        return f"the merged file does not parse (line {exc.lineno}: {exc.msg})"
    for n_old, n_new, a, b in zip(old_lines, new_lines, before, after):
        if a == b:
            continue
        ratio = edited_neighbour(a, b) if edits is not None else None
        if edits is None or ratio is None:
            return (
                f"the merge would put a {what} line elsewhere: old line {n_old} was {a}; "
                f"merged line {n_new} is {b}"
            )
        edits.append(ratio)
    return None


def split_runs(hunk: Hunk) -> list[Hunk]:
    """One hunk per run of changed lines, each with the context up to its neighbouring runs."""
    tags = [ln.tag for ln in hunk.lines]
    runs, k = [], 0
    while k < len(tags):
        if tags[k] == " ":
            k += 1
            continue
        start = k
        while k < len(tags) and tags[k] != " ":
            k += 1
        runs.append((start, k))
    out = []
    for i, (_a, _b) in enumerate(runs):
        lo = runs[i - 1][1] if i else 0
        hi = runs[i + 1][0] if i + 1 < len(runs) else len(tags)
        lines = hunk.lines[lo:hi]
        begin = hunk.src_begin + sum(1 for ln in hunk.lines[:lo] if ln.tag != "+")
        src_len = sum(1 for ln in lines if ln.tag != "+")
        tgt_len = sum(1 for ln in lines if ln.tag != "-")
        out.append(
            Hunk(
                begin if src_len else begin - 1,
                src_len,
                0,
                tgt_len,
                f"{hunk.header} (run {i + 1})",
                hunk.diff_line_no,
                list(lines),
            )
        )
    return out


def place_by_merge(old: list[Line], new: list[Line], hunk: Hunk, path: str) -> Merged | str:
    """The hunk placed in ``new`` by a checked three-way merge, or why not (a sentence).
    A hunk of several runs of changed lines that does not merge whole is merged run by run;
    the runs must land in their order and each pass the check on its own."""
    whole = _place_by_merge(old, new, hunk, path)
    parts = split_runs(hunk)
    if not isinstance(whole, str) or len(parts) < 2:
        return whole
    placed = []
    for number, part in enumerate(parts, 1):
        got = _place_by_merge(old, new, part, path)
        if isinstance(got, str):
            return f"{whole}; run by run: run {number}: {got}"
        placed.append(got)
    for a, b in itertools.pairwise(placed):
        if b.lo < a.hi or (b.lo == a.hi and not b.core[0].tag == a.core[-1].tag == "+"):
            return f"{whole}; run by run: its runs land out of order"
    core = list(placed[0].core)
    for a, b in itertools.pairwise(placed):
        core += [DiffLine(" ", t, e, 0) for t, e in new[a.hi : b.lo]] + b.core
    proof = "run by run: " + " | ".join(m.proof for m in placed)
    return Merged(hunk, placed[0].lo, placed[-1].hi, core, proof=proof)


def _place_by_merge(old: list[Line], new: list[Line], hunk: Hunk, path: str) -> Merged | str:
    if not path.endswith(".py"):
        return "not a Python file: merged hunks are only accepted with the structural check"
    mine = own_placement(hunk)
    if [(ln.text, ln.eol) for ln in hunk.source] != old[mine.start : mine.start + len(hunk.source)]:
        return "the hunk does not match the old file at its own line numbers"
    old_bytes, new_bytes = join_lines(old), join_lines(new)
    patched = join_lines(apply_placements(old, [mine]))
    merged_bytes, conflicts = merge_file(patched, old_bytes, new_bytes)
    if conflicts:
        region = conflict_region(split_lines(merged_bytes), new) if conflicts == 1 else None
        if region is None:
            return f"git merge-file: {conflicts} conflict(s) (upstream changed lines next to the hunk's own)"
        return resolve_conflict(new, hunk, path, patched, changed_lines(mine)[1], region)
    found = read_back(new, split_lines(merged_bytes), hunk)
    if isinstance(found, str):
        return found
    where = found.placement(new, 0, 0)
    if join_lines(apply_placements(new, [where])) != merged_bytes:
        return "the merge result is not the new file with the hunk applied"
    removed_old, added_old = changed_lines(mine)
    removed_new, added_new = changed_lines(where)
    edits: list[float] = []
    problem = _spot_problem(
        patched, added_old, merged_bytes, added_new, "added", path, edits
    ) or _spot_problem(old_bytes, removed_old, new_bytes, removed_new, "removed", path)
    if problem:
        return problem
    broken = compile_problem(merged_bytes, path)
    if broken:
        return f"the new file with the merged hunk does not compile ({broken})"
    first = (added_new or removed_new)[0]
    found.proof = (
        "3-way merge; each changed line in the same function and between the same "
        "statements as before"
        + (f" (one of them edited upstream, {min(edits):.0%} alike)" if edits else "")
        + f"; compiles (from line {first})"
    )
    return found


@dataclass
class Conflict:
    """The one conflict of a diff3 merge: the new text's side as lines [t0, t1) of the new
    text, and the old (base) side's lines."""

    t0: int
    t1: int
    base: list[Line]


def conflict_region(merged: list[Line], new: list[Line]) -> Conflict | None:
    """The one conflict of ``git merge-file --diff3`` output, when all else is the new text."""

    def where(mark: bytes, exact: bool) -> list[int]:
        return [i for i, (t, _) in enumerate(merged) if (t == mark if exact else t.startswith(mark + b" "))]

    marks = [
        where(b"<" * MARKER_SIZE, False),
        where(b"|" * MARKER_SIZE, False),
        where(b"=" * MARKER_SIZE, True),
        where(b">" * MARKER_SIZE, False),
    ]
    if any(len(m) != 1 for m in marks):
        return None
    start, base, mid, end = (m[0] for m in marks)
    if not start < base < mid < end:
        return None
    pre, theirs, post = merged[:start], merged[mid + 1 : end], merged[end + 1 :]
    if pre + theirs + post != new:
        return None
    return Conflict(len(pre), len(pre) + len(theirs), merged[base + 1 : mid])


def _contains(lines: list[Line], block: list[Line]) -> bool:
    n = len(block)
    return n > 0 and any(lines[i : i + n] == block for i in range(len(lines) - n + 1))


def _keeps_place(was, now, old: list[Line], conflict: Conflict, shift: tuple[int, int]) -> bool:
    """Same function, branch and enclosing statement, and next to the same statement on one
    side; on the other side, the old neighbour is a statement upstream rewrote in place: its old
    lines are on the old side of the conflict and the new neighbour is on the new side."""
    if (was.scope, was.blocks, was.inside) != (now.scope, now.blocks, now.inside):
        return False
    if was.inside or was == now:
        return was == now
    if was.before == now.before:
        old_span, other = (was.after_line, was.after_end), now.after_line
        kept, old_text, new_text = was.before, was.after, now.after
    elif was.after == now.after:
        old_span, other = (was.before_line, was.before_end), now.before_line
        kept, old_text, new_text = was.after, was.before, now.before
    else:
        return False
    if (
        kept.startswith("<")
        and difflib.SequenceMatcher(None, old_text, new_text, autojunk=False).ratio() < SIMILAR
    ):
        # kept only the start or end of the block: the rewritten statement must still
        # read as the old one, edited (not code moved elsewhere and replaced by a call)
        return False
    at, count = shift
    other = other - count if other > at else other  # back to the new text's numbers
    if not (other > 0 and conflict.t0 < other <= conflict.t1 and old_span[0] > 0):
        return False
    return _contains(conflict.base, old[old_span[0] - 1 : old_span[1]])


def resolve_conflict(
    new: list[Line], hunk: Hunk, path: str, patched: bytes, added_old: list[int], conflict: Conflict
) -> Merged | str:
    """Where git conflicted because upstream rewrote a neighbouring statement: try every place
    inside the conflict; accept the one place (up to blank lines) where the added lines keep
    their function, branch and one neighbouring statement, the other neighbour being the
    rewritten one, and the file compiles."""
    tags = [ln.tag for ln in hunk.lines]
    plus = [i for i, t in enumerate(tags) if t == "+"]
    if "-" in tags or not plus or plus != list(range(plus[0], plus[-1] + 1)):
        return (
            "git merge-file: conflict, and the hunk is not one run of added lines "
            "(upstream changed lines next to the hunk's own)"
        )
    added = [(ln.text, ln.eol) for ln in hunk.lines if ln.tag == "+"]
    try:
        was = spots(patched, added_old, filename=path)
    except SyntaxError as exc:
        return f"the old patched file does not parse (line {exc.lineno}: {exc.msg})"
    old_patched = split_lines(patched)
    region = (conflict.t0, conflict.t1)
    if region[1] - region[0] > MAX_CONFLICT:
        return (
            f"git merge-file: conflict over {region[1] - region[0]} lines of the new file "
            f"(more than {MAX_CONFLICT} are not searched)"
        )
    groups: dict[tuple, list[int]] = {}
    for at in range(region[0], region[1] + 1):
        text = join_lines(new[:at] + added + new[at:])
        numbers = list(range(at + 1, at + 1 + len(added)))
        try:
            now = spots(text, numbers, filename=path)
        except SyntaxError:
            continue
        if all(_keeps_place(a, b, old_patched, conflict, (at, len(added))) for a, b in zip(was, now)):
            groups.setdefault(tuple(now), []).append(at)
    where = f"lines {region[0] + 1}-{region[1]}" if region[1] > region[0] else f"line {region[0] + 1}"
    if len(groups) != 1:
        return (
            f"git merge-file: conflict (upstream rewrote {where}), and "
            + ("no place in it" if not groups else f"{len(groups)} different places in it")
            + " keeps the added lines in the same function and branch, next to the same "
            "statement on one side and to the statement upstream rewrote on the other"
        )
    ((kept, ats),) = groups.items()
    at = min(ats) if kept[0].before == was[0].before else max(ats)
    merged = join_lines(new[:at] + added + new[at:])
    broken = compile_problem(merged, path)
    if broken:
        return f"the new file with the hunk in place of the conflict does not compile ({broken})"
    anchor = was[0].before if kept[0].before == was[0].before else was[0].after
    proof = (
        f"git merge-file conflicted where upstream rewrote the neighbouring statement "
        f"({where}); the only place there in the same function and branch, next to the "
        f"same statement `{anchor[:60]}`; compiles (line {at + 1})"
    )
    return Merged(hunk, at, at, [DiffLine("+", t, e, 0) for t, e in added], proof=proof)


def _outer(hunk: Hunk) -> tuple[int, int]:
    tags = [ln.tag for ln in hunk.lines]
    lead = next((i for i, t in enumerate(tags) if t != " "), len(tags))
    trail = next((i for i, t in enumerate(reversed(tags)) if t != " "), 0)
    return lead, trail


def merge_unplaced(old: list[Line], new: list[Line], placements: list[Placement], path: str) -> None:
    """Place, in order, what exact matching left open, where a checked merge puts it.

    A merged hunk gets context lines from the new text (as many as it had, fewer where a
    neighbouring hunk is closer), must come after the previous placed hunk and before the next,
    and the file with every placed hunk must still compile; otherwise it stays unplaced with
    the reason added to the exact step's.
    """
    found: dict[int, Merged] = {}
    for i, p in enumerate(placements):
        if p.ok:
            continue
        got = place_by_merge(old, new, p.hunk, path)
        if isinstance(got, str):
            p.reason = f"{p.reason}; 3-way merge: {got}"
        else:
            found[i] = got
    if not found:
        return
    for i, p, prev_end in in_order(placements, found):
        m = found[i]
        nxt = next_start(placements, i, found, lambda f: f.lo, len(new))
        if m.lo < prev_end or m.hi > nxt:
            p.reason = (
                f"{p.reason}; 3-way merge: its merged place (line {m.lo + 1}) is not "
                "between the hunks before and after it; the order of the code changed"
            )
            continue
        lead, trail = _outer(p.hunk)
        lead, trail = min(lead, m.lo - prev_end), min(trail, nxt - m.hi)
        if lead + trail == 0 and _outer(p.hunk) != (0, 0):
            p.reason = (
                f"{p.reason}; 3-way merge: no context line is left between it and its neighbouring hunks"
            )
            continue
        q = m.placement(new, lead, trail)
        p.index, p.lines, p.merged = q.index, q.lines, m.proof
    merged = [p for p in placements if p.merged]
    if not merged:
        return
    broken = compile_problem(join_lines(apply_placements(new, placements)), path)
    if broken and not compile_problem(join_lines(new), path):
        for p in merged:
            p.index, p.lines, p.merged = None, None, ""
            p.reason = (
                f"{p.reason}; 3-way merge: the file with all of this patch's hunks "
                f"does not compile ({broken})"
            )


__all__ = [
    "GitMissing",
    "Merged",
    "changed_lines",
    "conflict_region",
    "merge_file",
    "merge_unplaced",
    "own_placement",
    "place_by_merge",
    "read_back",
    "resolve_conflict",
]
