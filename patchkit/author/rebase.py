"""patch.rebase: carry a series onto another upstream release, patch by patch, hunk by hunk.

The new upstream files come from PyPI (``onto`` is a version; the wheel is checked by sha256 as
in upstream.py) or from a local git clone (``onto`` is a tag, branch or commit, read with
GitPython without touching the work tree). Patch k is relocated against the new files with
patches 1..k-1 (as rebased) applied, so a hunk that uses an earlier patch's inserted line as
context still finds it. Each hunk is placed by exact match (relocate.py); what that leaves is
relocated by git's three-way merge when a structural check passes (merge3.py, pystructure.py);
what is still open and only inserts timer lines is placed by structure, as seriesgen places a
release's lines (structural.py).
``new_source`` may also be a target's own files (targetread.py, ``--onto-target``). A hunk that
does not place is kept in the written patch behind a marker context line, ``<<<<<<< patchkit
rebase ...``, that no upstream file contains, so verify and git apply refuse the patch until it
is edited by hand; the patch's header says so too.

The result is a new series folder keyed to the new pin (the old folder is never written),
with a REBASE.md report. Exit code 0 when every hunk relocated, 1 when any needs attention.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from patchkit import upstream
from patchkit.author.folders import umask, write_new_folder
from patchkit.author.merge3 import merge_unplaced
from patchkit.author.rebase_result import HunkOutcome, PatchOutcome, RebaseResult, Source
from patchkit.author.relocate import (
    Line,
    Placement,
    apply_at_own_numbers,
    apply_placements,
    diff_around,
    map_line,
    place_at_own_numbers,
    place_file,
    split_lines,
)
from patchkit.author.sglang_releases import rebase_aliases
from patchkit.author.structural import place_unplaced
from patchkit.engine import runtime_patch
from patchkit.engine.diffparse import DiffLine, FileDiff, Hunk, parse_patch
from patchkit.engine.series import Series, load_series
from patchkit.errors import InvalidInput, Refused

MARKER = "<<<<<<< patchkit rebase: this hunk did not relocate, edit it by hand (see REBASE.md)"
NOTE_FIRST = "patchkit rebase: NEEDS ATTENTION."
_HUNK_RE = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@(.*)$")
_IDENT_RE = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{2,}")
_KEYWORDS = {
    b"and",
    b"not",
    b"for",
    b"def",
    b"class",
    b"return",
    b"None",
    b"True",
    b"False",
    b"import",
    b"from",
    b"with",
    b"else",
    b"elif",
    b"while",
    b"lambda",
    b"self",
    b"pass",
    b"yield",
    b"async",
    b"await",
    b"try",
    b"except",
    b"finally",
    b"raise",
}


# ----------------------------------------------------------------------------- sources


def _wheel_source(
    name: str, version: str, paths: list[str], prefix: str | None, wheelhouse, trust_new: bool
) -> Source:
    wheel = upstream.fetch_wheel(name, version, wheelhouse=wheelhouse, trust_new=trust_new)
    files: dict[str, bytes | None] = {}
    for path in paths:
        try:
            inner = upstream.installed_path(path, prefix)
            files[path] = upstream.read_wheel_files(wheel.path, [inner])[inner]
        except upstream.UpstreamError:
            files[path] = None
    detail = f"PyPI wheel {wheel.path.name} (sha256 {wheel.sha256}, {wheel.trust})"
    return Source(f"{name} {version}", detail, version, None, files)


def _git_source(name: str, clone: Path, rev: str, paths: list[str], version: str | None) -> Source:
    commit = upstream.resolve_git_rev(clone, rev)
    files: dict[str, bytes | None] = {}
    for path in paths:
        try:
            files[path] = upstream.read_git_files(clone, commit, [path])[1][path]
        except upstream.UpstreamError:
            files[path] = None
    label = f"{name} {version}" if version else f"{name} {rev} ({commit[:12]})"
    return Source(label, f"git clone {clone}, {rev} = commit {commit}", version, commit, files)


def _tree_source(
    name: str, tree: Path, paths: list[str], prefix: str | None, version: str | None, commit: str | None
) -> Source:
    files: dict[str, bytes | None] = {}
    for path in paths:
        try:
            files[path] = upstream.locate_in_tree(Path(tree), path, prefix).read_bytes()
        except upstream.UpstreamError:
            files[path] = None
    label = f"{name} {version}" if version else f"{name} ({tree})"
    return Source(label, f"tree {tree}", version, commit, files)


def _version_from_tag(clone: Path, rev: str) -> str | None:
    """``v0.5.10`` -> ``0.5.10`` when ``rev`` is a tag of that form in the clone."""
    m = re.fullmatch(r"v(\d+(?:\.\d+)+[A-Za-z0-9.+-]*)", rev)
    if not m:
        return None
    import git

    try:
        tags = {t.name for t in git.Repo(clone).tags}
    except Exception:
        return None
    return m.group(1) if rev in tags else None


def _old_source(
    series: Series, clone, wheelhouse, old_tree, trust_new: bool = False
) -> tuple[Source | None, str]:
    """The pinned (old) files, for the report's upstream diffs; (None, why) if unavailable."""
    pin = series.pin
    paths = list(pin.files)
    try:
        if old_tree is not None:
            src = _tree_source(pin.name, old_tree, paths, pin.package_prefix, pin.version, pin.commit)
        elif clone is not None and pin.commit and _has_commit(clone, pin.commit):
            src = _git_source(pin.name, clone, pin.commit, paths, pin.version)
        elif pin.version:
            src = _wheel_source(pin.name, pin.version, paths, pin.package_prefix, wheelhouse, trust_new)
        else:
            return None, "the pin names no version, and no clone holds its commit"
    except Refused as exc:
        return None, f"could not fetch them: {exc}"
    for path, entry in pin.files.items():
        data = src.files.get(path)
        if data is None or upstream.sha256_bytes(data) != entry.sha256:
            return None, f"{src.detail}: {path} is not the pinned text"
    return src, src.detail


def _has_commit(clone: Path, commit: str) -> bool:
    try:
        upstream.resolve_git_rev(clone, commit)
        return True
    except Refused:
        return False


# ----------------------------------------------------------------------------- outcomes

# ----------------------------------------------------------------------------- patch text


def _render_line(ln: DiffLine) -> list[str]:
    text = ln.tag + ln.text.decode("utf-8", "surrogateescape")
    return [text] if ln.eol else [text, "\\ No newline at end of file"]


def _range(start: int, length: int, comma: bool) -> str:
    return f"{start},{length}" if comma or length != 1 else f"{start}"


def _header(raw: str, src_index: int, src_len: int, tgt_index: int, tgt_len: int) -> str:
    m = _HUNK_RE.match(raw)
    if m is None:
        raise InvalidInput(f"unexpected hunk header {raw!r}")
    src = src_index + 1 if src_len else src_index
    tgt = tgt_index + 1 if tgt_len else tgt_index
    return (
        f"@@ -{_range(src, src_len, bool(m.group(2)))} "
        f"+{_range(tgt, tgt_len, bool(m.group(4)))} @@{m.group(5)}"
    )


def _span(hunk: Hunk) -> tuple[int, int]:
    """0-based [start, end) of the hunk's raw lines (header, body, no-newline markers)."""
    last = hunk.lines[-1]
    return hunk.diff_line_no - 1, last.diff_line_no + (0 if last.eol else 1)


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _identifiers(data: bytes) -> set[bytes]:
    return set(_IDENT_RE.findall(data)) - _KEYWORDS


class _PatchRebaser:
    """Rebases one patch against the current new (and old) states; rewrites its raw text."""

    def __init__(self, ctx: _Context, name: str, raw: bytes, patch, edited: bool = False):
        self.ctx, self.name, self.patch, self.edited = ctx, name, patch, edited
        self.raw = raw.decode("utf-8", "surrogateescape").split("\n")
        self.edits: dict[int, tuple[int, list[str]]] = {}
        self.bare: dict[int, list[DiffLine]] = {}  # marked hunks written without context
        self.outcome = PatchOutcome(name)

    def run(self) -> bytes:
        for fd in self.patch.files:
            if fd.kind == "create":
                self._create(fd)
            else:
                self._modify(fd)
        lines = list(self.raw)
        for start in sorted(self.edits, reverse=True):
            end, new = self.edits[start]
            lines[start:end] = new
        if self.outcome.needs_attention:
            count = len([h for h in self.outcome.hunks if not h.relocated])
            note = (
                f"{NOTE_FIRST} {count} hunk(s) of this patch did not relocate onto "
                f"{self.ctx.new.label}; they\nare kept below behind a '<<<<<<< patchkit "
                "rebase' line and described in REBASE.md. Fix each one\n(context lines as "
                "in the new file, the marker line removed; line numbers may stay\n"
                "approximate), then run patch.rebase again with --resume.\n"
            )
            lines = (note + "\n").split("\n")[:-1] + lines
        text = "\n".join(lines).encode("utf-8", "surrogateescape")
        return text

    def _create(self, fd: FileDiff) -> None:
        ctx = self.ctx
        exists = ctx.new.files.get(fd.path) is not None or ctx.new_state.get(fd.path) is not None
        hunk = fd.hunks[0] if fd.hunks else None
        header = hunk.header if hunk else "(empty new file)"
        if exists:
            out = HunkOutcome(
                self.name,
                fd.path,
                1,
                header,
                "needs-attention",
                reason=f"creates {fd.path}, but {ctx.new.label} has such a file",
            )
            self.outcome.hunks.append(out)
            return
        ctx.new_state[fd.path] = [(ln.text, ln.eol) for h in fd.hunks for ln in h.lines if ln.tag == "+"]
        self.outcome.hunks.append(HunkOutcome(self.name, fd.path, 1, header, "carried", new_header=header))

    def _modify(self, fd: FileDiff) -> None:
        ctx = self.ctx
        cur = ctx.new_state.get(fd.path)
        old_cur = ctx.old_state.get(fd.path) if ctx.old_state is not None else None
        if cur is None:
            placements = [Placement(h, reason=f"{fd.path} is not in {ctx.new.label}") for h in fd.hunks]
            cur_for_marks: list[Line] = []
        else:
            placements = (self.edited and place_at_own_numbers(cur, fd.hunks)) or place_file(
                cur, fd.hunks, context_trim=ctx.context_trim
            )
            if ctx.merge and old_cur is not None and not self.edited and fd.kind == "modify":
                merge_unplaced(old_cur, cur, placements, fd.path)
            if ctx.structural and old_cur is not None and not self.edited and fd.kind == "modify":
                place_unplaced(old_cur, cur, placements, fd.path, aliases=rebase_aliases())
            cur_for_marks = cur
        self._mark_positions(placements, old_cur, cur_for_marks)
        delta = 0
        for number, p in enumerate(placements, 1):
            h = p.hunk
            start, end = _span(h)
            raw_header = self.raw[start]
            if p.ok:
                src_len = sum(1 for ln in p.body if ln.tag != "+")
                tgt_len = sum(1 for ln in p.body if ln.tag != "-")
                body = (
                    self.raw[start + 1 : end]
                    if p.body is h.lines or p.body == h.lines
                    else [t for ln in p.body for t in _render_line(ln)]
                )
            else:
                lines = self.bare.get(id(p))
                if lines is None:
                    src_len, tgt_len = len(h.source) + 1, len(h.target) + 1
                    body = [" " + MARKER] + self.raw[start + 1 : end]
                else:  # no room for its context: marker + changes only
                    src_len = 1 + sum(1 for ln in lines if ln.tag != "+")
                    tgt_len = 1 + sum(1 for ln in lines if ln.tag != "-")
                    body = [" " + MARKER] + [t for ln in lines for t in _render_line(ln)]
            # every hunk has an index now: a placed one its place, an unplaced one its marker's
            new_header = _header(raw_header, p.start, src_len, p.start + delta, tgt_len)
            delta += tgt_len - src_len
            if new_header != raw_header or body != self.raw[start + 1 : end]:
                self.edits[start] = (end, [new_header] + body)
            self.outcome.hunks.append(self._outcome(fd, number, p, new_header, old_cur, cur))
        if cur is not None:
            after = apply_placements(cur, placements)
            ctx.new_state[fd.path] = None if fd.kind == "delete" and all(p.ok for p in placements) else after

    def _mark_positions(self, placements: list[Placement], old_cur, cur: list[Line]) -> None:
        """Where an unplaced hunk is written: its old place mapped onto the new text, kept in
        order between its placed neighbours. Not a relocation: the marker line never matches."""
        prev_end = 0
        last_delta = 0
        for i, p in enumerate(placements):
            if p.ok:
                prev_end = p.end
                last_delta = p.start - (p.hunk.src_begin - 1)
                continue
            old_index = p.hunk.src_begin - 1
            want = (
                map_line(old_cur, cur, old_index) if old_cur is not None and cur else old_index + last_delta
            )
            nxt = next((q.start for q in placements[i + 1 :] if q.ok), None)
            need = len(p.hunk.source) + 1
            if nxt is not None and nxt - prev_end < need:
                # between two placed hunks with too little room for its context lines: write
                # the marker and its own changes only, so that the patch stays well-formed
                tags = [ln.tag for ln in p.hunk.lines]
                first = next((k for k, t in enumerate(tags) if t != " "), 0)
                last = len(tags) - next((k for k, t in enumerate(reversed(tags)) if t != " "), 0)
                self.bare[id(p)] = p.hunk.lines[first:last]
                need = 1 + sum(1 for ln in self.bare[id(p)] if ln.tag != "+")
                q = next(q for q in placements[i + 1 :] if q.ok)
                while (
                    nxt - prev_end < need
                    and len(q.body) > 1
                    and q.body[0].tag == " "
                    and q.body[1].tag == " "
                ):
                    q.index, q.lines = q.start + 1, q.body[1:]  # its leading context, for room
                    nxt = q.start
            if nxt is not None:
                want = min(want, nxt - need)
            want = max(want, prev_end, 0)
            p.index = want
            prev_end = want + need

    def _outcome(self, fd: FileDiff, number: int, p: Placement, new_header: str, old_cur, cur) -> HunkOutcome:
        h = p.hunk
        ctx = self.ctx
        old_index = h.src_begin - 1
        out = HunkOutcome(
            self.name,
            fd.path,
            number,
            h.header,
            "needs-attention",
            new_header=new_header.split(" @@", 1)[0] + " @@",
            reason=p.reason,
            candidates=p.candidates,
            trimmed=p.trimmed,
            edited=self.edited,
        )
        if p.ok:
            out.lines_key = tuple((ln.tag, ln.text, ln.eol) for ln in p.body)
            out.delta = p.start - old_index
            out.status = "moved" if out.delta or p.trimmed else "unchanged"
            if p.merged:
                out.status, out.proof = "merged", p.merged
            elif p.structural:
                out.status, out.proof = "placed", p.structural
            out.warnings = self._vanished(fd.path, h)
            return out
        out.hunk_text = "\n".join([h.header] + [t for ln in h.lines for t in _render_line(ln)])
        if old_cur is not None and cur and not self.edited:
            out.upstream_diff = diff_around(
                old_cur,
                cur,
                old_index,
                old_index + len(h.source),
                labels=(
                    f"{ctx.old_label}: {fd.path} (as patch {self.name} saw it)",
                    f"{ctx.new.label}: {fd.path} (after the rebased earlier patches)",
                ),
            )
        return out

    def _vanished(self, path: str, hunk: Hunk) -> list[str]:
        """Names the inserted lines use that the old release had and the new one lacks."""
        old = self.ctx.old.files.get(path) if self.ctx.old is not None else None
        new = self.ctx.new.files.get(path)
        if old is None or new is None:
            return []
        added = b"\n".join(ln.text for ln in hunk.lines if ln.tag == "+")
        gone = sorted(n for n in _identifiers(added) if n in _identifiers(old) and n not in _identifiers(new))
        return [
            f"an inserted line uses `{n.decode()}`, which {self.ctx.old_label} has in "
            f"{_short(path)} and {self.ctx.new.label} no longer has"
            for n in gone
        ]


def _advance_old(ctx: _Context, patch) -> None:
    """The old states after ``patch`` (the old series on its own pinned text)."""
    if ctx.old_state is None:
        return
    for fd in patch.files:
        if fd.kind == "create":
            ctx.old_state[fd.path] = [(ln.text, ln.eol) for h in fd.hunks for ln in h.lines if ln.tag == "+"]
        elif fd.path in ctx.old_state:
            ctx.old_state[fd.path] = apply_at_own_numbers(ctx.old_state[fd.path], fd.hunks)


def recount(text: str) -> str:
    """Rewrite hunk headers' line counts (and target starts) from their bodies, like
    ``git apply --recount``: a hand-edited hunk need not have its header updated."""
    lines = text.split("\n")
    headers: list[tuple[int, tuple[int, int] | None]] = []  # (line, (src, tgt) of a hunk | None)
    for i, line in enumerate(lines):
        if _HUNK_RE.match(line):
            n = i + 1
            src = tgt = 0
            while n < len(lines):
                if lines[n] == "" and n + 1 < len(lines) and lines[n + 1][:1] in (" ", "-", "+"):
                    lines[n] = " "  # an editor stripped a blank context line's space
                if lines[n][:1] not in (" ", "-", "+", "\\") or lines[n].startswith(
                    ("--- a/", "--- /dev/null", "+++ b/")
                ):
                    break
                tag = lines[n][:1]
                src += tag in (" ", "-")
                tgt += tag in (" ", "+")
                n += 1
            headers.append((i, (src, tgt)))
        elif line.startswith("diff --git "):
            headers.append((i, None))  # a new file: its hunks' offsets start again
    delta = 0
    for i, counts in headers:
        if counts is None:
            delta = 0
            continue
        src, tgt = counts
        m = _HUNK_RE.match(lines[i])
        assert m is not None, "collected above as a hunk header"
        start = int(m.group(1))
        index = start - 1 if src else start  # 0-based first source line
        lines[i] = _header(lines[i], index, src, index + delta, tgt)
        delta += tgt - src
    return "\n".join(lines)


def _strip_note(text: str) -> str:
    """Drop the NEEDS ATTENTION paragraph rebase put at the top of a patch."""
    if not text.startswith(NOTE_FIRST):
        return text
    end = text.find("\n\n")
    return text[end + 2 :] if end >= 0 else text


def _edited_patch(path: Path, name: str):
    """The hand-edited patch in the new folder, or None while it still carries a marker."""
    if not path.is_file():
        return None
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    if MARKER in text:
        return None
    raw = recount(_strip_note(text)).encode("utf-8", "surrogateescape")
    return raw, parse_patch(name, raw)


@dataclass
class _Context:
    new: Source
    old: Source | None
    old_label: str
    context_trim: bool
    new_state: dict[str, list[Line] | None]
    old_state: dict[str, list[Line]] | None
    merge: bool = True
    structural: bool = True


# ----------------------------------------------------------------------------- the operation


def default_out_dir(series_dir: Path, name: str, version: str | None, commit: str | None) -> Path:
    """``patches/<name-without-version>-v<version>`` beside the old series."""
    series_dir = Path(series_dir)
    base = re.sub(r"-v\d[^/]*$", "", series_dir.name) or name
    suffix = f"v{version}" if version else (commit or "unknown")[:12]
    return series_dir.parent / f"{base}-{suffix}"


def _new_pin(series: Series, new: Source) -> tuple[upstream.Pin, list[str], bool]:
    """(new pin, what changed, same release?)."""
    pin = series.pin
    files, changes = [], []
    same_files = True
    for path, entry in pin.files.items():
        data = new.files.get(path)
        if data is None:
            files.append(upstream.PinnedFile(path, entry.sha256, entry.lines))
            changes.append(f"{path}: not in {new.label}; the old entry is kept (verify refuses)")
            same_files = False
            continue
        fresh = upstream.PinnedFile(path, upstream.sha256_bytes(data), upstream.count_lines(data))
        files.append(fresh)
        if fresh.sha256 != entry.sha256:
            same_files = False
            changes.append(
                f"{path}: {entry.lines} -> {fresh.lines} lines, sha256 "
                f"{entry.sha256[:12]}... -> {fresh.sha256[:12]}..."
            )
    same_release = same_files and (
        (new.version is not None and new.version == pin.version)
        or (new.commit is not None and new.commit == pin.commit)
    )
    version, commit = new.version, new.commit
    if same_release:
        version, commit = pin.version, pin.commit
    if (version, commit) != (pin.version, pin.commit):
        changes.insert(
            0,
            f"upstream: version {pin.version} -> {version}, commit "
            f"{(pin.commit or 'none')[:12]} -> {(commit or 'none')[:12]}",
        )
    return (
        upstream.Pin(pin.name, version, commit, pin.package_prefix, {f.path: f for f in files}),
        changes,
        same_release,
    )


def rebase(
    series_dir: Path | str,
    onto: str,
    *,
    upstream_clone: Path | str | None = None,
    out_dir: Path | str | None = None,
    context_trim: bool = False,
    version: str | None = None,
    wheelhouse: Path | str | None = None,
    trust_new: bool = False,
    new_tree: Path | str | None = None,
    old_tree: Path | str | None = None,
    write: bool = True,
    resume: bool = False,
    merge: bool = True,
    new_source: Source | None = None,
    structural: bool | None = None,
) -> RebaseResult:
    """Rebase ``series_dir`` onto ``onto``; write the new series (unless ``write=False``).

    ``onto``: a PyPI version (without ``upstream_clone``) or a tag/branch/commit of the clone.
    ``version``: the distribution version to pin with a clone (default: from a ``vX.Y.Z`` tag).
    ``new_tree`` / ``old_tree``: use these pristine trees (either layout) instead of fetching.
    ``merge``: after the exact step, relocate what is left by a checked three-way merge
    (merge3.py); False: exact match only.
    ``new_source``: the new files as already read (e.g. from a target, targetread.py).
    ``structural``: last, place what is still open and only inserts timer lines by structure
    (structural.py: function and neighbouring statement, as seriesgen does); False: not;
    None (default): as ``merge`` (``merge=False`` is exact match only).
    ``resume``: the output folder exists from an earlier run and its patches were edited by
    hand; a patch there without a marker line is taken as it is (its header counts recounted,
    its hunks kept at their numbers when they match there exactly, otherwise relocated), the
    others are rebased from the old series again. Files are rewritten in place; REBASE.md keeps
    its text up to a "## Resume" section, which is written anew.
    """
    if structural is None:
        structural = merge
    series_dir = Path(series_dir).resolve()
    series = load_series(str(series_dir))
    clone = Path(upstream_clone) if upstream_clone is not None else None
    if not onto or not str(onto).strip():
        raise InvalidInput("rebase: --onto needs a version or a git revision")
    new = _new_source(series, onto, clone, new_source, new_tree, version, wheelhouse, trust_new)
    old, old_detail = _old_source(
        series, clone, wheelhouse, Path(old_tree) if old_tree is not None else None, trust_new
    )
    ctx = _context(series.pin, new, old, context_trim, merge, structural)
    new_pin, pin_changes, same_release = _new_pin(series, new)
    out = _out_dir(out_dir, series_dir, new_pin, resume)
    outputs, outcomes = _rebase_patches(ctx, series, series_dir, out if resume else None)
    if resume:
        _credit_tool(
            outcomes,
            rebase(
                series_dir,
                onto,
                upstream_clone=upstream_clone,
                context_trim=context_trim,
                version=version,
                wheelhouse=wheelhouse,
                trust_new=trust_new,
                new_tree=new_tree,
                old_tree=old_tree,
                write=False,
                merge=merge,
                new_source=new_source,
                structural=structural,
            ),
        )
    noop = same_release and all(o.identical for o in outcomes) and out == series_dir
    result = _result(ctx, series_dir, out, old_detail, outcomes, pin_changes, noop, resume)
    if not write or result.noop:
        return result
    if out == series_dir:
        raise InvalidInput(f"rebase: the new series would overwrite {series_dir}; pass --out")
    _write_series(
        series_dir, out, outcomes, outputs, None if same_release else new_pin, result.report, resume
    )
    result.written = True
    return result


def _new_source(
    series: Series,
    onto: str,
    clone: Path | None,
    new_source: Source | None,
    new_tree: Path | str | None,
    version: str | None,
    wheelhouse: Path | str | None,
    trust_new: bool,
) -> Source:
    """The new release's pinned files and those the series creates: ``new_source`` where the
    caller read them already, else from a pristine tree, a git clone's revision, or a wheel."""
    if new_source is not None:
        return new_source
    pin = series.pin
    created = [fd.path for fd in series.file_diffs if fd.kind == "create"]
    paths = list(pin.files) + [p for p in created if p not in pin.files]
    if new_tree is not None:
        return _tree_source(pin.name, Path(new_tree), paths, pin.package_prefix, version or onto, None)
    if clone is not None:
        return _git_source(pin.name, clone, onto, paths, version or _version_from_tag(clone, onto))
    ver = onto[1:] if re.fullmatch(r"v\d.*", onto) else onto
    return _wheel_source(pin.name, ver, paths, pin.package_prefix, wheelhouse, trust_new)


def _context(
    pin: upstream.Pin,
    new: Source,
    old: Source | None,
    context_trim: bool,
    merge: bool,
    structural: bool,
) -> _Context:
    """The rebase's state: the pinned files' lines in the new release and (where it could be
    read) the old one, each advanced patch by patch."""
    old_label = f"{pin.name} {pin.version}" if pin.version else f"{pin.name} {(pin.commit or 'pinned')[:12]}"
    return _Context(
        new=new,
        old=old,
        old_label=old_label,
        context_trim=context_trim,
        new_state={p: split_lines(data) for p in pin.files if (data := new.files[p]) is not None},
        # _old_source returns a Source only when every pinned file is there (and is the pinned text)
        old_state=(
            {p: split_lines(data) for p in pin.files if (data := old.files[p]) is not None} if old else None
        ),
        merge=merge,
        structural=structural,
    )


def _out_dir(out_dir: Path | str | None, series_dir: Path, new_pin: upstream.Pin, resume: bool) -> Path:
    """``--out``, else beside the old series (default_out_dir); with ``resume`` it must exist."""
    out = (
        Path(out_dir).resolve()
        if out_dir is not None
        else default_out_dir(series_dir, new_pin.name, new_pin.version, new_pin.commit)
    )
    if resume and not out.is_dir():
        raise InvalidInput(f"rebase --resume: {out} does not exist; run without --resume first")
    return out


def _result(
    ctx: _Context,
    series_dir: Path,
    out: Path,
    old_detail: str,
    outcomes: list[PatchOutcome],
    pin_changes: list[str],
    noop: bool,
    resume: bool,
) -> RebaseResult:
    """The rebase's result, not yet written, with its REBASE.md text (``resume``: the earlier
    report's text up to its "## Resume" section, that section anew)."""
    result = RebaseResult(
        series_dir,
        out,
        ctx.old_label,
        ctx.new,
        old_detail,
        ctx.context_trim,
        outcomes,
        pin_changes,
        written=False,
        noop=noop,
        old_available=ctx.old is not None,
        resumed=resume,
        merge=ctx.merge,
        structural=ctx.structural,
    )
    from patchkit.author.rebase_report import render_report, render_resume

    previous = out / "REBASE.md"
    if resume and previous.is_file():
        result.report = render_resume(result, previous.read_text())
    else:
        result.report = render_report(result)
    return result


def _rebase_patches(
    ctx: _Context, series: Series, series_dir: Path, resumed: Path | None
) -> tuple[dict[str, bytes], list[PatchOutcome]]:
    """Each patch of the series rebased in order (``resumed``: the output folder, whose
    hand-edited patches are taken as they are): the new bytes by name, and the outcomes."""
    outputs: dict[str, bytes] = {}
    outcomes = []
    for patch in series.patches:
        raw = runtime_patch.patch_data(str(series_dir), patch.name)
        edited = _edited_patch(resumed / patch.name, patch.name) if resumed is not None else None
        if edited is not None:
            worker = _PatchRebaser(ctx, patch.name, edited[0], edited[1], edited=True)
        else:
            worker = _PatchRebaser(ctx, patch.name, raw, patch)
        outputs[patch.name] = _renamed_release(worker.run(), series.pin, ctx.new)
        worker.outcome.identical = outputs[patch.name] == raw
        outcomes.append(worker.outcome)
        _advance_old(ctx, patch)
    return outputs, outcomes


def _write_series(
    series_dir: Path,
    out: Path,
    outcomes: list[PatchOutcome],
    outputs: dict[str, bytes],
    new_pin: upstream.Pin | None,
    report: str,
    resume: bool,
) -> None:
    """The new series folder (``resume``: rewritten in place): series, pin.toml (``new_pin``;
    None: the same release, the old pin.toml as it is), REBASE.md and the patches, an
    unchanged rendered patch stored as the old series stores it (its marker)."""
    files = {
        "series": (series_dir / "series").read_bytes(),
        "pin.toml": (series_dir / "pin.toml").read_bytes()
        if new_pin is None
        else upstream.format_pin(new_pin).encode(),
        "REBASE.md": report.encode(),
    }
    for outcome in outcomes:
        name = outcome.name
        if outcome.identical and runtime_patch.is_rendered(str(series_dir), name):
            # stored as the old series stores it: its marker (rendered from patchkit/timing)
            marker = Path(runtime_patch.marker_path(str(series_dir), name))
            files[marker.name] = marker.read_bytes()
        else:
            files[name] = outputs[name]
    if resume:
        _rewrite_in_place(out, files)
    else:
        write_new_folder(out, files, "rebase")


def _renamed_release(data: bytes, pin, new: Source) -> bytes:
    """The patch's header (its text before the first diff) names the new release where it
    named the old one as "<name> <version>" (e.g. "for sglang 0.5.9" -> "for sglang 0.5.10")."""
    if not pin.version or not new.version or new.version == pin.version:
        return data
    text = data.decode("utf-8", "surrogateescape")
    cut = re.search(r"^(diff --git |--- )", text, re.M)
    head, rest = (text[: cut.start()], text[cut.start() :]) if cut else (text, "")
    old_name = re.compile(rf"\b{re.escape(pin.name)} {re.escape(pin.version)}(?![\w.]*\d)")
    head = old_name.sub(f"{pin.name} {new.version}", head)
    return (head + rest).encode("utf-8", "surrogateescape")


def _credit_tool(outcomes: list[PatchOutcome], fresh: RebaseResult) -> None:
    """An edited hunk whose lines are what a fresh run writes for it moved by that run's
    method (exact / merged+checked); any other edited hunk was placed by hand."""
    made = {(h.patch, h.path, h.number): h for h in fresh.hunks if h.relocated}
    for h in (h for o in outcomes for h in o.hunks if h.edited and h.relocated):
        twin = made.get((h.patch, h.path, h.number))
        if twin is not None and twin.lines_key == h.lines_key:
            h.via = twin.method


def _rewrite_in_place(out: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        target = out / name
        if target.is_file() and target.read_bytes() == data:
            continue
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, target)


__all__ = ["MARKER", "HunkOutcome", "PatchOutcome", "RebaseResult", "Source", "default_out_dir", "rebase"]
