"""Rebase's last step: a hunk that inserts timer lines, placed by structure (seriesgen's way).

For a hunk that neither the exact match nor the checked three-way merge placed, and whose only
changes are added timer lines (``_pt.<call>(...)`` or the timer import): each added line is
learnt from the old file with the patch applied (timerplace.learn: its function by qualified
name, the statement right after it, else right before it, by ``ast.unparse`` text, shape or
called name) and found in the new file (timerplace.place, with the moves of
sglang_releases.rebase_aliases: functions renamed or moved, either way). Nothing is guessed: a
line without exactly one candidate, or a phase that cannot be placed whole, leaves the hunk for a
person, as the earlier steps do. Where the statement after a line and the one before it point at different
places (upstream added code between them), a begin keeps to the statement it preceded and an end
to the one it followed; an end that closed its block closes it again (prefer_side, _block_end).

The hunk is then written where its lines land (context from the new file), and accepted only when
  - every line of the hunk is placed, in the hunk's own order, between the hunks placed before
    and after it;
  - the file with all of this patch's hunks compiles; and
  - in every function, the timer lines of the new file (earlier patches' and this one's) come in
    an order the old patched file has them in (a subsequence of the old function's timer calls,
    by call and phase), so a phase never opens before the phase it followed.
Otherwise every hunk this step placed in the file is taken back, with the reason.
"""

from __future__ import annotations

import ast

from patchkit.author import timerplace
from patchkit.author.pystructure import compile_problem
from patchkit.author.relocate import Line, Placement, apply_placements, in_order, join_lines, next_start
from patchkit.engine.diffparse import DiffLine, Hunk

CONTEXT = 3


def _timer_line(text: bytes) -> bool:
    try:
        body = ast.parse(text.decode("utf-8").strip()).body
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return False
    return len(body) == 1 and timerplace.is_timer_stmt(body[0])


def eligible(hunk: Hunk) -> bool:
    """Only added lines (no removed ones), every one a timer statement."""
    added = [ln for ln in hunk.lines if ln.tag == "+"]
    return (
        bool(added)
        and all(ln.tag != "-" for ln in hunk.lines)
        and all(ln.eol and _timer_line(ln.text) for ln in added)
    )


def _added_numbers(hunks: list[Hunk]) -> list[list[int]]:
    """For each hunk, the 1-based lines of its added lines in the old file with every hunk
    applied at its own numbers (as merge3.own_placement puts them)."""
    out, delta = [], 0
    for h in hunks:
        pos = h.src_begin - 1 + delta
        mine = []
        for ln in h.lines:
            if ln.tag == " ":
                pos += 1
            elif ln.tag == "+":
                mine.append(pos + 1)
                pos += 1
        out.append(mine)
        delta += len(h.target) - len(h.source)
    return out


def _text(lines: list[Line]) -> str | None:
    data = join_lines(lines)
    if b"\r" in data or b"\x0c" in data:
        return None  # str.splitlines would number lines unlike the patch does
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _kind(stmt: ast.stmt) -> tuple[str, str]:
    """(call, phase), a cycle_begin's phase being its kind (decode / prefill)."""
    call, phase = timerplace.timer_kind(stmt)
    if call == "cycle_begin":
        phase = next(
            (ast.unparse(k.value) for k in timerplace._call_of(stmt).keywords if k.arg == "kind"), ""
        )
    return call, phase


def timer_sequences(text: str) -> dict[str, list[tuple[str, str]]]:
    """Qualified function -> its timer calls (call, phase) in source order (imports left out)."""
    seq: dict[str, list[tuple[str, str]]] = {}
    for site in timerplace._sites(ast.parse(text)):
        if timerplace.is_timer_stmt(site.stmt) and not isinstance(site.stmt, ast.ImportFrom):
            seq.setdefault(site.function, []).append(_kind(site.stmt))
    return seq


def _subsequence(short: list, long: list) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def order_problem(old_text: str, new_text: str, aliases: dict[str, str]) -> str:
    """'' when each function's timer calls in ``new_text`` come in an order ``old_text`` has
    them in. A new function that several old ones map to (code moved into it) is checked
    against each of them, over the calls that one has."""
    old_seq = timer_sequences(old_text)
    new_seq = timer_sequences(new_text)
    target = timerplace.Target("new", new_text)
    sources: dict[str, list[list]] = {}
    for fn, calls in old_seq.items():
        sources.setdefault(target.resolve_function(fn, aliases) or fn, []).append(calls)
    for fn, calls in new_seq.items():
        olds = sources.get(fn)
        if not olds:
            return f"`{fn}` would get timer lines the old patched file has in no such function"
        shown = ", ".join(c + (f"({p})" if p else "") for c, p in calls)
        if any(all(c not in old for old in olds) for c in calls):
            return f"`{fn}` would get a timer call its old counterpart does not make ({shown})"
        for old in olds:
            if not _subsequence([c for c in calls if c in old], old):
                return f"the timer lines of `{fn}` would run in another order than before ({shown})"
    return ""


def prefer_side(anchor, spots: list) -> list:
    """When the places the probes found differ (code was added between the line's neighbours
    upstream): a line that opened its block (function) first opens it again, one that closed
    it closes it again; otherwise an end or a note keeps to the statement it followed (the last
    one it timed) and a begin, a cycle's begin or end to the statement it preceded."""
    follows = anchor.call in ("end", "note")

    def rank(spot) -> int:
        how = spot[2]
        if anchor.first_in and how.startswith(("first statement of", "first in the block")):
            return 0
        if anchor.last_in and how.startswith("end of "):
            return 0
        return 1 if ("(after `" if follows else "(before `") in how else 2

    return sorted(spots, key=rank)


def _block_end(target, line: int, anchor) -> int:
    """An end that closed its block in the old file (no statement after it there) closes the
    block here too: past statements upstream added at the block's end (not past a return)."""
    if anchor.call != "end" or any(p.side == "before" for p in anchor.probes):
        return line
    ending = [s for s in target.sites if s.stmt.end_lineno == line]
    key = next(p.key for p in anchor.probes if p.side == "after") if anchor.probes else None
    same = [s for s in ending if s.key == key]
    if not (same or ending):
        return line
    site = same[0] if len(same) == 1 else max(ending, key=lambda s: s.stmt.lineno)
    rest = [s for s in site.block[site.index + 1 :] if not timerplace.is_timer_stmt(s)]
    if not rest or any(isinstance(s, (ast.Return, ast.Raise, ast.Continue, ast.Break)) for s in rest):
        return line
    return rest[-1].end_lineno


def place_unplaced(
    old: list[Line],
    new: list[Line],
    placements: list[Placement],
    path: str,
    aliases: dict[str, str] | None = None,
) -> None:
    """Place, by structure, the unplaced hunks of one file diff that only add timer lines.

    ``old``: the old file as the patch saw it; ``new``: the new file with the earlier rebased
    patches; ``placements``: this file diff's, in hunk order (exact and merged ones placed).
    """
    aliases = aliases or {}
    todo = [i for i, p in enumerate(placements) if not p.ok and eligible(p.hunk)]
    if not todo or not path.endswith(".py"):
        return

    def refuse(indices, why: str) -> None:
        for i in indices:
            placements[i].reason = f"{placements[i].reason}; structural placement: {why}"

    hunks = [p.hunk for p in placements]
    own = [Placement(h, index=h.src_begin - 1, lines=list(h.lines)) for h in hunks]
    if any(
        [(ln.text, ln.eol) for ln in h.source] != old[o.start : o.start + len(h.source)]
        for h, o in zip(hunks, own)
    ):
        return refuse(todo, "the patch does not apply to the old file at its own line numbers")
    old_text = _text(apply_placements(old, own))
    new_text = _text(new)
    if old_text is None or new_text is None:
        return refuse(todo, "the file is not plain UTF-8 text with newline line ends")
    try:
        anchors = timerplace.learn(path, old_text, [""] * (old_text.count("\n") + 1))
        target = timerplace.Target(path, new_text)
    except SyntaxError as exc:
        return refuse(todo, f"a file does not parse (line {exc.lineno}: {exc.msg})")
    by_line = {a.line: a for a in anchors}
    numbers = _added_numbers(hunks)
    wanted: dict[int, list[timerplace.Anchor]] = {}
    for i in todo:
        mine = [a for n in numbers[i] if (a := by_line.get(n)) is not None]
        if len(mine) != len(numbers[i]):
            refuse([i], "an added line is not a timer statement inside a function")
            continue
        wanted[i] = mine
    if not wanted:
        return
    body = [a for i in sorted(wanted) for a in wanted[i] if a.call != "import"]
    result = timerplace.place(body, {path: target}, {path: path}, aliases=aliases, prefer=prefer_side)
    spot = {id(p.anchor): p for p in result.placements}
    why_not = {id(a): why for a, why in result.missing}
    for a, why in result.skipped:
        why_not[id(a)] = why
    found: dict[int, tuple[list[tuple[int, bytes]], str]] = {}
    for i, mine in wanted.items():
        lines, hows = _hunk_lines(mine, target, new, spot)
        if len(lines) != len(mine):
            a = mine[len(lines)]
            refuse([i], f"`{a.text}`: " + why_not.get(id(a), "no single place for it"))
            continue
        if [at for at, _ in lines] != sorted(at for at, _ in lines):
            refuse([i], "its lines would land out of the hunk's order")
            continue
        found[i] = (lines, "; ".join(hows))
    if not found:
        return
    _fit(new, placements, found, refuse)
    placed = [i for i in found if placements[i].ok]
    if not placed:
        return
    _check_patched(old_text, new, placements, placed, path, aliases, refuse)


def _hunk_lines(
    mine: list[timerplace.Anchor], target: timerplace.Target, new: list[Line], spot: dict
) -> tuple[list[tuple[int, bytes]], list[str]]:
    """One hunk's added lines placed in the new file, in order (an import after the last
    module-level import, a timer line where timerplace put it, then to the end of its block),
    up to the first that has no place: (line number, text) each, and how each was placed."""
    lines: list[tuple[int, bytes]] = []
    hows = []
    for a in mine:
        if a.call == "import":
            if a.text.encode() in (t.strip() for t, _ in new):
                break
            stmt = timerplace._top_import_anchor(target.tree)
            if stmt is None:
                break
            at, indent = target.insertion(stmt, "after")
            lines.append((at, (indent + a.text).encode()))
            hows.append(f"`{a.text}` after the last module-level import")
            continue
        p = spot.get(id(a))
        if p is None:
            break
        at = _block_end(target, p.line, a)
        lines.append((at, p.text.rstrip("\n").encode()))
        hows.append(
            f"`{a.text}` {p.how.removeprefix('tool: ')}"
            + (" (then to the end of its block, as before)" if at != p.line else "")
        )
    return lines, hows


def _check_patched(
    old_text: str, new: list[Line], placements: list[Placement], placed: list[int], path: str, aliases, refuse
) -> None:
    """The file with every hunk placed must compile (where the new file did) and keep the
    phases' order; otherwise the structurally placed hunks are taken back and refused."""
    patched = join_lines(apply_placements(new, placements))
    problem = ""
    broken = compile_problem(patched, path)
    if broken and not compile_problem(join_lines(new), path):
        problem = f"the file with all of this patch's hunks does not compile ({broken})"
    if not problem:
        try:
            problem = order_problem(old_text, patched.decode("utf-8"), aliases)
        except SyntaxError as exc:
            problem = f"the patched file does not parse (line {exc.lineno}: {exc.msg})"
    if problem:
        for i in placed:
            placements[i].index = placements[i].lines = None
            placements[i].structural = ""
        refuse(placed, problem)


def _fit(new: list[Line], placements: list[Placement], found: dict, refuse) -> None:
    """Write each found hunk as a Placement with context from the new file, in order between
    the placed hunks around it; one that does not fit stays unplaced."""
    for i, p, prev_end in in_order(placements, found):
        lines, how = found[i]
        lo, hi = lines[0][0], lines[-1][0]
        nxt = next_start(placements, i, found, lambda f: f[0][0][0], len(new))
        if lo < prev_end or hi > nxt:
            refuse(
                [i],
                f"its place (line {lo + 1}) is not between the hunks before and after "
                "it; the order of the code changed",
            )
            continue
        lead, trail = min(CONTEXT, lo - prev_end), min(CONTEXT, nxt - hi)
        if lead + trail == 0:
            refuse([i], "no context line is left between it and its neighbouring hunks")
            continue
        body = [DiffLine(" ", t, e, 0) for t, e in new[lo - lead : lo]]
        cursor = lo
        for at, text in lines:
            body += [DiffLine(" ", t, e, 0) for t, e in new[cursor:at]]
            body.append(DiffLine("+", text, True, 0))
            cursor = at
        body += [DiffLine(" ", t, e, 0) for t, e in new[hi : hi + trail]]
        p.index, p.lines, p.structural = lo - lead, body, how


__all__ = ["eligible", "order_problem", "place_unplaced", "prefer_side", "timer_sequences"]
