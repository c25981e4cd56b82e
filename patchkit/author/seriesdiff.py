"""patch.diff: what changed between two series, for review (typically before and after a rebase).

Compared: the pin (upstream version/commit, each file's sha256 and line count), the order of
the patches, and for each patch present in both its header and its hunks. Hunks of one file
are paired by their change (the added and removed lines), so a hunk that only moved shows as
"moved by N lines" and one whose context or change was edited shows a small diff of its body.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from patchkit.engine import runtime_patch
from patchkit.engine.diffparse import FileDiff, Hunk, Patch
from patchkit.engine.series import Series, load_series


def _body(h: Hunk) -> list[str]:
    out = []
    for ln in h.lines:
        text = ln.tag + ln.text.decode("utf-8", "replace")
        out.append(text if ln.eol else text + "  (no newline at end of file)")
    return out


def _change(h: Hunk) -> tuple:
    return tuple((ln.tag, ln.text) for ln in h.lines if ln.tag != " ")


@dataclass
class HunkChange:
    status: str  # same | moved | edited | added | removed
    old: Hunk | None
    new: Hunk | None
    notes: list[str] = field(default_factory=list)

    @property
    def shift(self) -> int:
        return self.new.src_start - self.old.src_start if self.old and self.new else 0


def pair_hunks(old: list[Hunk], new: list[Hunk]) -> list[HunkChange]:
    """Pair the hunks of one file by their change lines; the rest in order."""
    matcher = difflib.SequenceMatcher(
        None, [_change(h) for h in old], [_change(h) for h in new], autojunk=False
    )
    out: list[HunkChange] = []
    for _tag, i1, i2, j1, j2 in matcher.get_opcodes():
        pairs = list(zip(old[i1:i2], new[j1:j2]))
        for a, b in pairs:
            out.append(_compare(a, b))
        out += [HunkChange("removed", a, None) for a in old[i1 + len(pairs) : i2]]
        out += [HunkChange("added", None, b) for b in new[j1 + len(pairs) : j2]]
    return out


def _compare(a: Hunk, b: Hunk) -> HunkChange:
    notes = []
    if _change(a) != _change(b):
        notes.append("change edited")
    ctx_a = [(ln.text, ln.eol) for ln in a.lines if ln.tag == " "]
    ctx_b = [(ln.text, ln.eol) for ln in b.lines if ln.tag == " "]
    if ctx_a != ctx_b:
        notes.append("context changed")
    if notes:
        return HunkChange("edited", a, b, notes)
    return HunkChange("same" if a.src_start == b.src_start else "moved", a, b)


def _files(p: Patch) -> dict[str, FileDiff]:
    return {fd.path: fd for fd in p.files}


def _pin_lines(a: Series, b: Series) -> list[str]:
    out = []
    for key in ("name", "version", "commit", "package_prefix"):
        va, vb = getattr(a.pin, key), getattr(b.pin, key)
        if va != vb:
            out.append(f"  {key}: {va or '(none)'} -> {vb or '(none)'}")
    for path in list(a.pin.files) + [p for p in b.pin.files if p not in a.pin.files]:
        fa, fb = a.pin.files.get(path), b.pin.files.get(path)
        if fa is None:
            assert fb is not None  # the path comes from one of the two pins
            out.append(f"  + {path}: {fb.lines} lines, sha256 {fb.sha256[:12]}")
        elif fb is None:
            out.append(f"  - {path} (no longer pinned)")
        elif fa != fb:
            out.append(
                f"  {path}: {fa.lines} -> {fb.lines} lines, sha256 {fa.sha256[:12]} -> {fb.sha256[:12]}"
            )
    return out or ["  unchanged"]


def _order_lines(a: list[str], b: list[str]) -> list[str]:
    if a == b:
        return [f"series: the same {len(a)} patches in the same order"]
    out = ["series:"]
    for line in difflib.unified_diff(a, b, "from", "to", lineterm="", n=len(a) + len(b)):
        if not line.startswith(("---", "+++", "@@")):
            out.append("  " + line)
    return out


def _hunk_line(n: int, c: HunkChange) -> str:
    if c.status == "added":
        assert c.new is not None
        return f"    hunk {n}: added {c.new.header}"
    if c.status == "removed":
        assert c.old is not None
        return f"    hunk {n}: removed {c.old.header}"
    assert c.old is not None and c.new is not None  # same, moved, edited: both sides
    moved = f"moved by {c.shift:+d} lines" if c.shift else "in place"
    if c.status == "same":
        return f"    hunk {n}: {c.old.header} unchanged"
    if c.status == "moved":
        return f"    hunk {n}: {c.old.header} -> {c.new.header}, {moved}"
    return f"    hunk {n}: {c.old.header} -> {c.new.header}, {moved}, {', '.join(c.notes)}:"


def _patch_lines(pa: Patch | None, pb: Patch | None, raw_same: bool) -> list[str]:
    either = pb or pa
    assert either is not None  # a patch of at least one side
    name = either.name
    if pa is None:
        assert pb is not None
        return [f"{name}: added ({sum(len(f.hunks) for f in pb.files)} hunks)"]
    if pb is None:
        return [f"{name}: removed"]
    if raw_same:
        return [f"{name}: identical"]
    out = [f"{name}:"]
    if pa.header != pb.header:
        out.append("  header changed:")
        out += [
            "    " + ln
            for ln in difflib.unified_diff(pa.header.splitlines(), pb.header.splitlines(), lineterm="", n=0)
            if not ln.startswith(("---", "+++", "@@"))
        ]
    fa, fb = _files(pa), _files(pb)
    for path in list(fa) + [p for p in fb if p not in fa]:
        a, b = fa.get(path), fb.get(path)
        if a is None or b is None:
            out.append(f"  {path}: {'added' if a is None else 'removed'} in this patch")
            continue
        changes = pair_hunks(a.hunks, b.hunks)
        if all(c.status == "same" for c in changes) and a.kind == b.kind:
            out.append(f"  {path}: unchanged")
            continue
        counts: dict[str, int] = {}
        for c in changes:
            counts[c.status] = counts.get(c.status, 0) + 1
        out.append(f"  {path}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        for n, c in enumerate(changes, 1):
            out.append(_hunk_line(n, c))
            if c.status == "edited":
                assert c.old is not None and c.new is not None
                out += [
                    "      " + ln
                    for ln in difflib.unified_diff(_body(c.old), _body(c.new), lineterm="", n=1)
                    if not ln.startswith(("---", "+++"))
                ]
    return out


def series_diff(from_dir: str, to_dir: str) -> str:
    """A review text of what changed from series ``from_dir`` to series ``to_dir``."""
    a, b = load_series(str(from_dir)), load_series(str(to_dir))
    out = [f"patch.diff {a.name} -> {b.name}", "", "pin:"] + _pin_lines(a, b) + [""]
    names_a = [p.name for p in a.patches]
    names_b = [p.name for p in b.patches]
    out += _order_lines(names_a, names_b) + [""]
    pa, pb = {p.name: p for p in a.patches}, {p.name: p for p in b.patches}
    totals: dict[str, int] = {}
    for name in names_b + [n for n in names_a if n not in pb]:
        raw_same = False
        if name in pa and name in pb:
            raw_same = _read(a, name) == _read(b, name)
        lines = _patch_lines(pa.get(name), pb.get(name), raw_same)
        out += lines
        if name in pa and name in pb and not raw_same:
            for fa in pa[name].files:
                fb = _files(pb[name]).get(fa.path)
                if fb is not None:
                    for c in pair_hunks(fa.hunks, fb.hunks):
                        totals[c.status] = totals.get(c.status, 0) + 1
    out += [
        "",
        "hunks in changed patches: " + (", ".join(f"{v} {k}" for k, v in sorted(totals.items())) or "none"),
    ]
    if totals.get("edited"):
        out += [
            "(an edited hunk's body is shown as a diff of diff lines: the first column says "
            "from -> to, the second is the hunk's own ' ', '-' or '+')"
        ]
    return "\n".join(out) + "\n"


def _read(s: Series, name: str) -> bytes:
    """The patch's bytes as the series is read (a runtime patch's marker rendered)."""
    return runtime_patch.patch_data(s.directory, name)
