"""Plan: compose every patch of a series into one edit per file, against the pinned original.

Patches of a series stack (quilt semantics: patch 2's numbers are relative to the file after
patch 1). Instead of applying them one by one on the target, the planner replays them here on a
symbolic copy of each file: a list of items that are either *original line N* (content unknown
locally until a hunk states it) or *new line* (content known). The result says, for each file:
which original lines must hold which text (checked on the target at their exact numbers), which
original lines survive, and where new lines go — everything the sed renderer needs.

A pinned file has `lines` newline-terminated lines (`wc -l`) and possibly one more line without a
final newline. That possible line is tracked as a *phantom* until a hunk names it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from patchkit.engine.diffparse import FileDiff, Hunk
from patchkit.engine.series import PinnedFile, Series
from patchkit.errors import InvalidInput

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def orig_no(it) -> int | None:
    """Original line number of a state element (an int is an untouched original line)."""
    return it if isinstance(it, int) else it.orig


def is_new(it) -> bool:
    return not isinstance(it, int) and it.orig is None


def is_phantom(it) -> bool:
    return not isinstance(it, int) and it.phantom


@dataclass(slots=True)
class Item:
    orig: int | None  # original line number, or None for a line the series adds
    text: bytes | None  # known content (None: an original line no hunk mentions)
    eol: bool = True  # ends with "\n"
    phantom: bool = False  # the possible unterminated last line of a pinned file


@dataclass
class HunkRef:
    """Where one hunk expects original lines; used for precise drift reports."""

    patch: str
    header: str
    lines: list[tuple[int, bytes]]  # (original line number, expected text)
    number: int = 0  # its place in its patch file: hunk 1, 2, ... counted from the file's top
    order: int = 0  # its place in the series (patch order, then hunk order)
    start: int = 0  # where its header puts the first of `lines` (in the text the patches before it leave)


@dataclass
class FilePlan:
    path: str
    kind: str  # 'modify' | 'create' | 'delete'
    pinned: PinnedFile | None
    final: list = field(default_factory=list)  # Items, and ints for untouched original lines
    expected: dict[int, tuple[bytes, bool]] = field(default_factory=dict)
    hunk_refs: list[HunkRef] = field(default_factory=list)
    orig_known: int = 0  # original lines known to exist (phantom excluded)
    executable: bool = False  # created with mode 100755
    phantom_open: bool = False  # a possible unterminated line is still unresolved
    removed: list[int] = field(default_factory=list)  # original lines a hunk took out

    @property
    def kept(self) -> set[int]:
        return {
            it if type(it) is int else it.orig
            for it in self.final
            if type(it) is int or (it.orig is not None and not it.phantom)
        }

    @property
    def deleted(self) -> list[int]:
        """Original lines not in the result: exactly those a hunk removed (none comes back)."""
        return sorted(n for n in self.removed if n <= self.orig_known)

    def _items(self) -> list[Item]:
        """The Items of the result (after planning; untouched lines are plain ints)."""
        cached = self.__dict__.get("_items_cache")
        if cached is None:
            cached = self.__dict__["_items_cache"] = [it for it in self.final if type(it) is not int]
        return cached

    def expected_pre_lines(self) -> list[tuple[int, bytes, bool]]:
        cached = self.__dict__.get("_pre_lines")
        if cached is None:
            cached = self.__dict__["_pre_lines"] = [(n, t, e) for n, (t, e) in sorted(self.expected.items())]
        return cached

    def expected_post_lines(self) -> list[tuple[int, bytes, bool]]:
        """(new line number, text, eol) for every line of the result whose content is known."""
        cached = self.__dict__.get("_post_lines")
        if cached is not None:
            return cached
        out = []
        expected = self.expected
        for pos, it in enumerate(self.final, 1):
            if type(it) is int:
                if it in expected:
                    t, e = expected[it]
                    out.append((pos, t, e))
                continue
            if it.phantom:
                continue
            if it.text is not None:
                out.append((pos, it.text, it.eol))
            elif it.orig in expected:
                t, e = expected[it.orig]
                out.append((pos, t, e))
        self.__dict__["_post_lines"] = out
        return out

    @property
    def post_wc(self) -> int:
        """`wc -l` of the result: an unresolved phantom adds no newline either way."""
        return len(self.final) - sum(1 for it in self._items() if it.phantom or not it.eol)

    @property
    def post_lines_known(self) -> int:
        """Lines sed sees in the result when no phantom exists."""
        return len(self.final) - sum(1 for it in self._items() if it.phantom)


def plan_series(series: Series) -> list[FilePlan]:
    plans: dict[str, FilePlan] = {}
    counted: dict[str, int] = {}  # patch name -> hunks of it counted so far (earlier files of it)
    for order, fd in enumerate(series.file_diffs):
        plan = plans.get(fd.path)
        if plan is None:
            plan = _start_plan(fd, series.pin.files.get(fd.path))
            plans[fd.path] = plan
        elif plan.kind == "delete":
            raise InvalidInput(f"{fd.where()}: {fd.path} was deleted by an earlier patch")
        elif fd.kind == "create":
            raise InvalidInput(f"{fd.where()}: creates {fd.path}, which an earlier patch touched")
        first = counted.get(fd.patch_name, 0)
        counted[fd.patch_name] = first + len(fd.hunks)
        _apply_file_diff(plan, fd, first, order)
    for plan in plans.values():
        _finish(plan)
    return list(plans.values())


def _start_plan(fd: FileDiff, pinned: PinnedFile | None) -> FilePlan:
    if fd.kind == "create":
        return FilePlan(path=fd.path, kind="create", pinned=None, executable=fd.executable)
    assert pinned is not None  # checked when the series was loaded
    plan = FilePlan(path=fd.path, kind="modify", pinned=pinned, orig_known=pinned.lines)
    # Untouched original lines stay plain ints; hunks turn the lines they name into Items.
    plan.final = list(range(1, pinned.lines + 1))
    if pinned.sha256 != EMPTY_SHA256:
        plan.final.append(Item(pinned.lines + 1, None, eol=False, phantom=True))
        plan.phantom_open = True
    return plan


def _apply_file_diff(plan: FilePlan, fd: FileDiff, first: int = 0, order: int = 0) -> None:
    """``first``: the hunks of this patch file before this file's; ``order``: the file diff's
    place in the series (both only name hunks in reports)."""
    # Bottom-up, so that the positions of earlier hunks stay valid.
    for i in reversed(range(len(fd.hunks))):
        hunk = fd.hunks[i]
        _apply_hunk(plan, fd, hunk, HunkRef(fd.patch_name, hunk.header, [], first + i + 1, order))
    if fd.kind == "delete":
        if any(not is_phantom(it) for it in plan.final):
            raise InvalidInput(f"{fd.where()}: deletes {fd.path} but its hunks do not remove every line")
        # A deletion diff shows the whole file: an unterminated last line would be in it.
        plan.phantom_open = False
        plan.kind = "delete"
        plan.final = []


def _apply_hunk(plan: FilePlan, fd: FileDiff, hunk: Hunk, ref: HunkRef) -> None:
    state = plan.final
    begin = hunk.src_begin - 1  # 0-based index of the first source line
    source = hunk.source
    if begin < 0 or begin + len(source) > len(state):
        raise InvalidInput(
            f"{fd.where(hunk)}: reaches past the end of {fd.path} "
            f"({_real_len(state)} lines at this point of the series)"
        )
    for offset, line in enumerate(source):
        item = state[begin + offset]
        if isinstance(item, int):
            item = state[begin + offset] = Item(item, None)
        if not ref.lines:
            ref.start = begin + offset + 1
        _match_source_line(plan, fd, hunk, line, item, ref)
    # Build the replacement: context lines keep their identity, added lines are new items.
    replacement: list[Item] = []
    src_iter = iter(state[begin : begin + len(source)])
    for line in hunk.lines:
        if line.tag == "+":
            replacement.append(Item(None, line.text, line.eol))
        else:
            item = next(src_iter)
            if line.tag == " ":
                replacement.append(item)
            elif item.orig is not None:
                plan.removed.append(item.orig)
    state[begin : begin + len(source)] = replacement
    if replacement and not replacement[-1].eol:
        # The new text ends the file here: whatever follows can only be an unresolved phantom.
        tail = state[begin + len(replacement) :]
        if any(not is_phantom(it) for it in tail):
            raise InvalidInput(
                f"{fd.where(hunk)}: marks a line as the last of the file "
                "('No newline at end of file') but lines follow it"
            )
        if tail:
            del state[begin + len(replacement) :]
            plan.phantom_open = False
    if ref.lines:
        plan.hunk_refs.append(ref)


def _match_source_line(plan, fd, hunk, line, item: Item, ref: HunkRef) -> None:
    if item.orig is None:
        if item.text != line.text or item.eol != line.eol:
            raise InvalidInput(
                f"{fd.where(hunk, line)}: expects {line.text!r} but an earlier patch of the series "
                f"left {item.text!r} there"
            )
        return
    if item.phantom:
        if line.eol:
            raise InvalidInput(
                f"{fd.where(hunk, line)}: reaches past the end of {plan.path} (pin.toml says "
                f"{plan.pinned.lines} lines; line {item.orig} could only be an "
                "unterminated last line, but the diff gives it a newline)"
            )
        item.phantom = False
        item.text = line.text
        plan.phantom_open = False
        plan.orig_known = item.orig
    elif not line.eol:
        raise InvalidInput(
            f"{fd.where(hunk, line)}: marks original line {item.orig} as having no final newline, "
            f"but pin.toml says the file has {plan.pinned.lines} newline-terminated lines"
        )
    known = plan.expected.get(item.orig)
    if known is not None and known != (line.text, line.eol):
        raise InvalidInput(
            f"{fd.where(hunk, line)}: patches of the series disagree about original line "
            f"{item.orig}: {known[0]!r} vs {line.text!r}"
        )
    plan.expected[item.orig] = (line.text, line.eol)
    item.text = line.text
    ref.lines.append((item.orig, line.text))


def _real_len(state: list[Item]) -> int:
    return sum(1 for it in state if not is_phantom(it))


def _finish(plan: FilePlan) -> None:
    items = [it for it in plan.final if type(it) is not int]  # untouched lines are fine as they are
    for it in items[:-1]:
        if it.phantom:
            raise InvalidInput(
                f"{plan.path}: lines are added after the pinned file's possible "
                "unterminated last line; the diff must show that line"
            )
    if items and plan.final[-1] is not items[-1] and not items[-1].eol and not items[-1].phantom:
        raise InvalidInput(
            f"{plan.path}: a line without a final newline is followed by other lines in the result"
        )
    for it in items[:-1]:
        if not it.eol and not it.phantom:
            raise InvalidInput(
                f"{plan.path}: a line without a final newline is followed by other lines in the result"
            )
    # Original lines must stay in ascending order (patches cannot reorder).
    last = 0
    for it in plan.final:
        n = it if type(it) is int else it.orig
        if n is not None:
            assert n > last, plan.path
            last = n
