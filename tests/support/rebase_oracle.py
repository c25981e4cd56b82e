"""An independent check of where rebase put each line, for tests and bench/bench_rebase.py.

Deliberately not the AST check rebase itself uses (patchkit.author.pystructure): this one reads text
only. A line's place is the chain of `def`/`class` lines above it with smaller indentation
(its function, by qualified name), the statement before it at the same indentation (or the
kind of block it opens: `<opens else>`) and the statement after it at the same indentation (or
`<dedent>`), each by its first two words, skipping blank and comment lines and the hunk's own
lines. A relocated line is *misplaced*
when its place in the new patched file differs from its place in the old patched file.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchkit.author.merge3 import changed_lines, own_placement
from patchkit.author.relocate import apply_placements, split_lines
from patchkit.engine.diffparse import parse_patch

_DEF = re.compile(rb"^(\s*)(?:async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")


def _indent(text: bytes) -> int:
    return len(text) - len(text.lstrip(b" \t"))


def _plain(text: bytes) -> bool:
    s = text.strip()
    return bool(s) and not s.startswith(b"#")


_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_.]*|\d+|'[^']*'|\"[^\"]*\"|[-+*/%<>=!]+")


def _words(lines, i: int, count: int = 2) -> bytes:
    """The first ``count`` words of the statement starting at line i (brackets, commas and
    line breaks dropped), so that re-wrapping it, or an edit further inside it, does not
    count as a change of neighbour."""
    words: list[bytes] = []
    for text, _ in lines[i : i + 20]:
        words += _WORD.findall(text)
        if len(words) >= count:
            break
    return b" ".join(words[:count])


_STRING = re.compile(rb"'[^'\\]*(?:\\.[^'\\]*)*'|\"[^\"\\]*(?:\\.[^\"\\]*)*\"")


def _depths(lines) -> list[int]:
    """Bracket depth at the start of each line (continuation lines have depth > 0)."""
    depth, out = 0, []
    for text, _ in lines:
        out.append(depth)
        code = _STRING.sub(b"", text)
        code = code.split(b"#", 1)[0]
        depth = max(0, depth + sum(code.count(c) for c in b"([{") - sum(code.count(c) for c in b")]}"))
    return out


def _closer(text: bytes) -> bool:
    return text.strip()[:1] in (b")", b"]", b"}")


def _before(lines, index: int, added: set[int], ind: int) -> bytes:
    """The previous statement's first line at this indentation, or the block's opener kind."""
    i = index - 1
    depth = _depths(lines)
    while i >= 0:
        text = lines[i][0]
        if i in added or not _plain(text) or _indent(text) > ind or _closer(text) or depth[i] > 0:
            i -= 1
            continue
        if _indent(text) == ind:
            return _words(lines, i)
        word = text.split()[0].rstrip(b":(")
        return b"<opens " + (b"def" if word in (b"def", b"async") else word) + b">"
    return b"<start>"


def _after(lines, index: int, added: set[int], ind: int) -> bytes:
    depth = _depths(lines)
    for i in range(index + 1, len(lines)):
        text = lines[i][0]
        if i in added or not _plain(text) or _indent(text) > ind or depth[i] > 0:
            continue
        return _words(lines, i) if _indent(text) == ind and not _closer(text) else b"<dedent>"
    return b"<end>"


def place_of(lines: list[tuple[bytes, bool]], index: int, added: set[int]) -> tuple:
    """(qualified function, previous statement or opener, next statement or dedent) of the
    0-based ``index``, judged by indentation; blank, comment and ``added`` lines skipped."""
    text = lines[index][0]
    ind = _indent(text) if _plain(text) else 10**6
    names, limit = [], ind
    for i in range(index - 1, -1, -1):
        m = _DEF.match(lines[i][0])
        if m and len(m.group(1)) < limit:
            names.append(m.group(2).decode())
            limit = len(m.group(1))
    return (
        ".".join(reversed(names)) or "<module>",
        _before(lines, index, added, ind),
        _after(lines, index, added, ind),
    )


def hunk_places(text: list, placement) -> tuple[list, list]:
    """Places of a hunk's removed lines (in ``text``) and added lines (in the result)."""
    removed, added = changed_lines(placement)
    after = apply_placements(text, [placement])
    rm = {n - 1 for n in removed}
    ad = {n - 1 for n in added}
    return ([place_of(text, n - 1, rm) for n in removed], [place_of(after, n - 1, ad) for n in added])


def _patches(series_dir) -> list:
    """The series' patches; one that does not parse (a rebase output whose marked hunk has no
    room before the next hunk) counts as having no relocated hunk."""
    from patchkit.author.authoring import read_series_names
    from patchkit.engine.diffparse import Patch
    from patchkit.engine.runtime_patch import patch_data
    from patchkit.errors import InvalidInput

    out = []
    for name in read_series_names(Path(series_dir)):
        try:
            out.append(parse_patch(name, patch_data(str(series_dir), name)))
        except InvalidInput:
            out.append(Patch(name=name, header="", files=[]))
    return out


def _states(series_dir, files: dict[str, bytes]) -> dict:
    """{patch: {path: (text before the patch, [placement, or None for a marked hunk])}}."""
    from patchkit.author.rebase import MARKER

    state = {p: split_lines(d) for p, d in files.items() if d is not None}
    out: dict = {}
    for patch in _patches(series_dir):
        step = out[patch.name] = {}
        for fd in patch.files:
            if fd.kind != "modify" or fd.path not in state:
                continue
            placed = [
                None if any(MARKER.encode() in ln.text for ln in h.lines) else own_placement(h)
                for h in fd.hunks
            ]
            step[fd.path] = (state[fd.path], placed)
            state[fd.path] = apply_placements(state[fd.path], [p for p in placed if p])
    return out


def misplaced(old_series, old_files: dict[str, bytes], new_series, new_files: dict[str, bytes]):
    """[(patch, path, hunk number, what)] for every relocated line whose place changed;
    ``*_files``: the pristine upstream files (checkout paths) each series is pinned to."""
    problems = []
    old_steps = _states(old_series, old_files)
    for name, step in _states(new_series, new_files).items():
        for path, (text, placed) in step.items():
            old_text, old_placed = old_steps[name][path]
            for number, (new_p, old_p) in enumerate(zip(placed, old_placed), 1):
                if new_p is None:
                    continue
                now, was = hunk_places(text, new_p), hunk_places(old_text, old_p)
                if now != was:
                    problems.append((name, path, number, f"was {was}, now {now}"))
    return problems


def left_function(
    old_series,
    old_files: dict[str, bytes],
    new_series,
    new_files: dict[str, bytes],
    aliases: dict[str, str] | None = None,
):
    """[(patch, path, hunk number, what)] for every relocated hunk with an added line that is
    not in the function (by the text oracle: ``def`` lines above it, by indentation) that the
    old patched file has it in, nor in that function's ``aliases`` (renamed or moved)."""
    aliases = aliases or {}
    problems = []
    old_steps = _states(old_series, old_files)
    for name, step in _states(new_series, new_files).items():
        for path, (text, placed) in step.items():
            old_text, old_placed = old_steps[name][path]
            for number, (new_p, old_p) in enumerate(zip(placed, old_placed), 1):
                if new_p is None:
                    continue
                now = [p[0] for p in hunk_places(text, new_p)[1]]
                was = [p[0] for p in hunk_places(old_text, old_p)[1]]
                if len(now) != len(was) or any(n != w and aliases.get(w) != n for n, w in zip(now, was)):
                    problems.append((name, path, number, f"was in {was}, now in {now}"))
    return problems


# ----------------------------------------------------------------------------- a hand-made series


def _runs(series_dir, files: dict[str, bytes]) -> list[tuple[str, int, tuple]]:
    """Every run of added lines of the series' unmarked hunks, as
    (patch, hunk number, (path, pristine line before, pristine line after, texts)): where it
    sits among the pristine file's own code lines (blank and comment lines skipped), whatever
    other patches added around it."""
    from patchkit.author.rebase import MARKER

    origin = {p: list(range(len(split_lines(d)))) for p, d in files.items() if d is not None}
    pristine = {p: split_lines(d) for p, d in files.items() if d is not None}

    def code(path: str, o) -> bool:  # a pristine line that is not blank or a comment
        return o is not None and _plain(pristine[path][o][0])

    state = {p: split_lines(d) for p, d in files.items() if d is not None}
    out = []
    for patch in _patches(series_dir):
        for fd in patch.files:
            if fd.kind != "modify" or fd.path not in state:
                continue
            placed = []
            for number, h in enumerate(fd.hunks, 1):
                if any(MARKER.encode() in ln.text for ln in h.lines):
                    continue
                placed.append(own_placement(h))
                src = h.src_begin - 1
                run: list[bytes] = []
                for ln in h.lines + [None]:
                    if ln is not None and ln.tag == "+":
                        run.append(ln.text)
                        continue
                    if run:
                        prev = next((o for o in reversed(origin[fd.path][:src]) if code(fd.path, o)), -1)
                        nxt = next((o for o in origin[fd.path][src:] if code(fd.path, o)), -2)
                        out.append((patch.name, number, (fd.path, prev, nxt, tuple(run))))
                        run = []
                    if ln is not None:
                        src += 1
            new_origin, cursor = [], 0
            for p in placed:
                new_origin += origin[fd.path][cursor : p.index]
                src = p.index
                for ln in p.lines:
                    if ln.tag == "+":
                        new_origin.append(None)
                    else:
                        if ln.tag == " ":
                            new_origin.append(origin[fd.path][src])
                        src += 1
                cursor = src
            origin[fd.path] = new_origin + origin[fd.path][cursor:]
            state[fd.path] = apply_placements(state[fd.path], placed)
    return out


def hand_disagreements(series_dir, hand_dir, files: dict[str, bytes]):
    """[(patch, hunk number, what)] for each relocated run of added lines of ``series_dir``
    that the hand-made series ``hand_dir`` (pinned to the same ``files``) does not have at the
    same place among the pristine lines; files the hand series does not patch are left out."""
    from patchkit.author.upstream import read_pin

    theirs = {run for _, _, run in _runs(hand_dir, files)}
    covered = set(read_pin(Path(hand_dir) / "pin.toml").files)
    return [
        (
            name,
            number,
            f"{run[3][0].decode().strip()!r} between pristine lines "
            f"{run[1] + 1} and {run[2] + 1} of {run[0].rsplit('/', 1)[-1]}",
        )
        for name, number, run in _runs(series_dir, files)
        if run[0] in covered and run not in theirs
    ]


__all__ = ["hand_disagreements", "hunk_places", "left_function", "misplaced", "place_of"]
