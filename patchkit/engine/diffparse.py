"""Git-style unified diffs -> a validated, byte-exact model.

unidiff does the parsing; this module wraps its one error class with the patch file and the diff
line, refuses what patchkit does not support (binary, rename, copy, mode changes), and keeps each
line's bytes exactly (CR included) together with its "\\ No newline at end of file" marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from patchkit.engine.difftext import split_lines
from patchkit.errors import InvalidInput
from patchkit.paths import path_problem

DEV_NULL = "/dev/null"
_UNSUPPORTED_HEADERS = (
    ("rename from", "rename"),
    ("rename to", "rename"),
    ("copy from", "copy"),
    ("copy to", "copy"),
    ("similarity index", "rename/copy"),
    ("old mode", "mode change"),
    ("new mode", "mode change"),
    ("GIT binary patch", "binary"),
)
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class DiffLine(NamedTuple):
    tag: str  # ' ' context, '-' removed, '+' added
    text: bytes  # the line without its "\n" (a CR of a CRLF file stays)
    eol: bool  # False when followed by "\ No newline at end of file"
    diff_line_no: int


@dataclass
class Hunk:
    src_start: int
    src_len: int
    tgt_start: int
    tgt_len: int
    header: str
    diff_line_no: int
    lines: list[DiffLine] = field(default_factory=list)

    @property
    def source(self) -> list[DiffLine]:
        return [ln for ln in self.lines if ln.tag != "+"]

    @property
    def target(self) -> list[DiffLine]:
        return [ln for ln in self.lines if ln.tag != "-"]

    @property
    def src_begin(self) -> int:
        """First source line covered, as a half-open interval start (insertions sit after src_start)."""
        return self.src_start if self.src_len else self.src_start + 1

    @property
    def src_end(self) -> int:
        return self.src_begin + self.src_len

    def __str__(self) -> str:
        return self.header


@dataclass
class FileDiff:
    path: str
    kind: str  # 'modify' | 'create' | 'delete'
    hunks: list[Hunk]
    patch_name: str
    diff_line_no: int
    executable: bool = False  # a created file with git's "new file mode 100755"

    def where(self, hunk: Hunk | None = None, line: DiffLine | None = None) -> str:
        parts = [f"{self.patch_name}", f"file {self.path}"]
        if hunk is not None:
            parts.append(f"hunk '{hunk.header}'")
        lineno = (
            line.diff_line_no
            if line is not None
            else (hunk.diff_line_no if hunk is not None else self.diff_line_no)
        )
        parts.append(f"diff line {lineno}")
        return ", ".join(parts)


@dataclass
class Patch:
    name: str
    header: str
    files: list[FileDiff]


def _unquote_git_path(name: str) -> str:
    """Undo git's C-style quoting of unusual path names ("a/x\\tb")."""
    if not (len(name) >= 2 and name[0] == '"' and name[-1] == '"'):
        return name
    body = encode(name[1:-1])
    out = bytearray()
    i = 0
    simple = {
        ord("n"): 10,
        ord("t"): 9,
        ord('"'): 34,
        ord("\\"): 92,
        ord("a"): 7,
        ord("b"): 8,
        ord("f"): 12,
        ord("r"): 13,
        ord("v"): 11,
    }
    while i < len(body):
        c = body[i]
        if c == 92 and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in simple:
                out.append(simple[nxt])
                i += 2
                continue
            if 48 <= nxt <= 55 and i + 3 < len(body) + 1:
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
        out.append(c)
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _side_path(name: str | None, prefix: str, where: str) -> str | None:
    if name is None:
        return None
    name = _unquote_git_path(name.strip())
    if name == DEV_NULL:
        return None
    if not name.startswith(prefix):
        raise InvalidInput(f"{where}: path {name!r} lacks the git-style '{prefix}' prefix")
    path = name[len(prefix) :]
    problem = path_problem(path)
    if problem:
        raise InvalidInput(f"{where}: unsafe path {path!r}: {problem}")
    return path


def parse_patch(name: str, data: bytes) -> Patch:
    """Parse one patch file; every problem names the patch and the diff line."""
    if b"\0" in data:
        raise InvalidInput(f"{name}: contains NUL bytes (binary patches are not supported)")
    text = data.decode("utf-8", "surrogateescape")
    lines = split_lines(text)
    _check_hunk_counts(name, lines)  # before unidiff, which blames the next hunk's header
    try:
        patchset = PatchSet(lines)
    except UnidiffParseError as e:
        lineno = _guess_error_line(lines, str(e))
        raise InvalidInput(f"{name}: malformed diff near line {lineno}: {e}") from e
    header_end = next((i for i, ln in enumerate(lines) if ln.startswith(("diff --git ", "--- "))), len(lines))
    header = "".join(lines[:header_end])
    _check_hunk_bodies(name, lines)
    files = [_convert_file(name, pf, lines) for pf in patchset]
    if not files:
        raise InvalidInput(f"{name}: no file diffs found (is this a unified diff?)")
    _check_stray_lines(name, lines, patchset)
    _check_trailing_text(name, lines, patchset)
    return Patch(name=name, header=header, files=files)


def _guess_error_line(lines: list[str], message: str) -> int:
    """unidiff's errors quote the offending line; find it to report a number."""
    _, _, quoted = message.partition(": ")
    for i, ln in enumerate(lines, 1):
        if quoted and ln == quoted:
            return i
    hunks = [i for i, ln in enumerate(lines, 1) if ln.startswith("@@ ")]
    return hunks[-1] if hunks else 1


def _check_hunk_bodies(name: str, lines: list[str]) -> None:
    """Refuse hunk headers unidiff would silently skip (e.g. '@@ -1 +1 @@@')."""
    for i, ln in enumerate(lines, 1):
        if ln.startswith("@@") and not _HUNK_HEADER.match(ln):
            raise InvalidInput(f"{name}: diff line {i}: malformed hunk header {ln.rstrip()!r}")


def _check_hunk_counts(name: str, lines: list[str]) -> None:
    """A hunk whose body ends (next hunk, next file, end of patch) before its header's counts
    are met: blame that hunk's header, with the counts its body has."""
    i = 0
    while i < len(lines):
        m = _HUNK_HEADER.match(lines[i])
        if not m:
            i += 1
            continue
        header_no, header = i + 1, lines[i].rstrip("\n")
        want_old = int(m.group(2)) if m.group(2) is not None else 1
        want_new = int(m.group(4)) if m.group(4) is not None else 1
        old = new = 0
        i += 1
        while i < len(lines) and (old < want_old or new < want_new):
            ln = lines[i]
            if ln.startswith(("@@ ", "diff --git ")) or (
                ln.startswith("--- ")
                and i + 1 < len(lines)
                and lines[i + 1].startswith("+++ ")
                and old + 1 > want_old
            ):
                break
            tag = ln[:1]
            if tag in (" ", "\n") or ln == "":
                old, new = old + 1, new + 1
            elif tag == "-":
                old += 1
            elif tag == "+":
                new += 1
            elif tag != "\\":
                break
            i += 1
        if old < want_old or new < want_new:
            raise InvalidInput(
                f"{name}: diff line {header_no}: hunk header {header!r} counts "
                f"{want_old} old and {want_new} new lines, but its body has "
                f"{old} and {new}"
            )


_AFTER_HUNK = (
    "diff --git ",
    "--- ",
    "+++ ",
    "index ",
    "new file mode ",
    "deleted file mode ",
    "old mode ",
    "new mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "Binary files ",
    "GIT binary patch",
    "\\ ",
    "@@ ",
)


def _check_trailing_text(name: str, lines: list[str], patchset) -> None:
    """Text after the first hunk that is neither a hunk line nor a diff header is refused: a
    patch with bytes appended (a bad paste, a concatenation) must not apply silently."""
    consumed = {
        ln.diff_line_no for pf in patchset for h in pf for ln in h if getattr(ln, "diff_line_no", None)
    }
    first = next((i for i, ln in enumerate(lines) if ln.startswith("@@ ")), None)
    if first is None:
        return
    for i in range(first, len(lines)):
        ln, no = lines[i], i + 1
        if no in consumed or not ln.strip() or ln.startswith(_AFTER_HUNK):
            continue
        if ln in ("-- \n", "-- ") and not any(x.startswith("@@ ") for x in lines[i + 1 :]):
            return  # git format-patch's signature ("-- " then the git version) ends the patch
        shown = ln.rstrip("\n")
        raise InvalidInput(
            f"{name}: diff line {no}: {shown[:60]!r} after a hunk is not part of "
            "a diff (text appended to the patch?)"
        )


def _check_stray_lines(name: str, lines: list[str], patchset) -> None:
    """A body line that no hunk consumed means a header count is too small: refuse, don't skip."""
    consumed = {
        ln.diff_line_no for pf in patchset for h in pf for ln in h if getattr(ln, "diff_line_no", None)
    }
    first = next((i for i, ln in enumerate(lines) if ln.startswith(("diff --git ", "--- "))), None)
    if first is None:
        return
    for i in range(first, len(lines)):
        ln, no = lines[i], i + 1
        if no in consumed or ln[:1] not in (" ", "+", "-"):
            continue
        if ln in ("-- \n", "-- ") and not any(x.startswith("@@ ") for x in lines[i + 1 :]):
            break  # git format-patch's signature ("-- " then the git version) ends the patch
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            continue
        if ln.startswith("+++ ") and i > 0 and lines[i - 1].startswith("--- "):
            continue
        raise InvalidInput(
            f"{name}: diff line {no}: {ln.rstrip()!r} is outside every hunk "
            "(a hunk header's line count is too small?)"
        )


def _convert_file(patch_name: str, pf, lines: list[str]) -> FileDiff:
    lineno = getattr(pf, "diff_line_no", None) or 1
    where = f"{patch_name}, diff line {lineno}"
    info = [str(x) for x in (pf.patch_info or [])]
    for raw in info:
        for marker, what in _UNSUPPORTED_HEADERS:
            if raw.startswith(marker):
                raise InvalidInput(f"{where}: {what} diffs are not supported ({raw.strip()!r})")
    if pf.is_binary_file:
        raise InvalidInput(f"{where}: binary diffs are not supported")
    src = _side_path(pf.source_file, "a/", where)
    tgt = _side_path(pf.target_file, "b/", where)
    if src is None and tgt is None:
        raise InvalidInput(f"{where}: both sides are /dev/null")
    if src is not None and tgt is not None and src != tgt:
        raise InvalidInput(f"{where}: rename {src} -> {tgt}: renames are not supported")
    created = any(raw.startswith("new file mode") for raw in info)
    kind = "create" if src is None or created else "delete" if tgt is None else "modify"
    path = tgt if kind == "create" else src
    if path is None:  # 'new file mode' with a /dev/null target
        raise InvalidInput(f"{where}: a new file whose target side is /dev/null")
    mode = getattr(pf, "target_mode", None) if kind != "delete" else None
    if mode not in (None, "100644", "100755"):
        raise InvalidInput(f"{where}: {path}: file mode {mode} (symlink or submodule) is not supported")
    hunks = [_convert_hunk(patch_name, path, h) for h in pf]
    fd = FileDiff(
        path=path,
        kind=kind,
        hunks=hunks,
        patch_name=patch_name,
        diff_line_no=lineno,
        executable=(kind == "create" and mode == "100755"),
    )
    if not hunks and kind == "modify":
        raise InvalidInput(f"{where}: {path}: no hunks (mode-only or empty diffs are not supported)")
    _check_hunk_order(fd)
    return fd


def _convert_hunk(patch_name: str, path: str, h) -> Hunk:
    header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
    out: list[DiffLine] = []
    first_no = None
    for ln in h:
        if ln.line_type == "\\":
            if not out:
                raise InvalidInput(
                    f"{patch_name}, {path}, hunk '{header}': 'No newline' marker with no line before it"
                )
            prev = out[-1]
            out[-1] = DiffLine(prev.tag, prev.text, False, prev.diff_line_no)
            continue
        if ln.line_type not in (" ", "-", "+"):
            continue  # unidiff attaches blank separator lines after a hunk; they are not content
        value = ln.value
        if value.endswith("\n"):
            value = value[:-1]
        if first_no is None:
            first_no = ln.diff_line_no
        out.append(DiffLine(ln.line_type, value.encode("utf-8", "surrogateescape"), True, ln.diff_line_no))
    hunk = Hunk(
        h.source_start, h.source_length, h.target_start, h.target_length, header, (first_no or 1) - 1, out
    )
    where = f"{patch_name}, file {path}, hunk '{header}' (diff line {hunk.diff_line_no})"
    if h.source_length == 0 and h.target_length == 0:
        raise InvalidInput(f"{where}: empty hunk")
    if h.source_length and h.source_start == 0:
        raise InvalidInput(f"{where}: source start 0 with a non-empty range")
    for side in (hunk.source, hunk.target):
        for ln in side[:-1]:
            if not ln.eol:
                raise InvalidInput(
                    f"{where}, diff line {ln.diff_line_no}: 'No newline at end "
                    "of file' marker on a line that is not the last of its side"
                )
    return hunk


def _check_hunk_order(fd: FileDiff) -> None:
    """Hunks must be in ascending order, must not overlap, and their target starts must agree."""
    delta = 0
    prev: Hunk | None = None
    for h in fd.hunks:
        if prev is not None and h.src_begin < prev.src_end:
            raise InvalidInput(
                f"{fd.where(h)}: overlaps or precedes the previous hunk "
                f"'{prev.header}' (hunks must be ascending and disjoint)"
            )
        expected_tgt = h.src_begin + delta
        got_tgt = h.tgt_start if h.tgt_len else h.tgt_start + 1
        if fd.kind == "modify" and got_tgt != expected_tgt:
            raise InvalidInput(
                f"{fd.where(h)}: target start {h.tgt_start} does not match the "
                f"source position (expected {expected_tgt - (0 if h.tgt_len else 1)})"
            )
        delta += h.tgt_len - h.src_len
        prev = h
    if fd.kind == "create" and any(h.src_len for h in fd.hunks):
        raise InvalidInput(f"{fd.where(fd.hunks[0])}: a new file's hunk has source lines")
    if fd.kind == "delete" and any(h.tgt_len for h in fd.hunks):
        raise InvalidInput(f"{fd.where(fd.hunks[0])}: a deleted file's hunk has target lines")
