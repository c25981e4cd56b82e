"""Explain drift precisely: which hunk's lines moved, changed or vanished, with both texts.

Used on the numbered copy of a drifted file that the target program sends back (only on the
failure path). Also the exact-match search that `patch.rebase` relocates hunks with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from patchkit.engine.plan import FilePlan, HunkRef

T = TypeVar("T")


def find_block(lines: Sequence[T], block: Sequence[T]) -> list[int]:
    """1-based start positions where `block` occurs exactly in `lines`."""
    if not block:
        return []
    first, n = block[0], len(block)
    return [i + 1 for i in range(len(lines) - n + 1) if lines[i] == first and lines[i : i + n] == block]


@dataclass
class HunkDrift:
    patch: str
    header: str
    status: str  # in-place | moved | changed | ambiguous
    detail: str
    number: int = 0  # hunk N of its patch file
    order: int = 0  # its place in the series: (order, number) sorts hunks as the series applies them
    start: int = 0  # where its header puts its first line
    pinned_at: int = 0  # moved: the pinned line its lines start at (after the patches before it)
    found_at: int = 0  # moved: the line they start at in the file
    delta: int = 0  # moved: found_at - pinned_at

    def __str__(self) -> str:
        return f"{self.patch} {self.header}: {self.status}: {self.detail}"


def _show(b: bytes) -> str:
    return repr(b.decode("utf-8", "replace"))


def explain_hunk(ref: HunkRef, lines: list[bytes]) -> HunkDrift:
    """Where the hunk's lines are in ``lines`` against where the pin puts them. Every line
    number said is one of the file's own lines (the pinned numbering), never the header's: the
    header counts the lines the patches before it add, so its numbers differ from the pinned
    ones wherever an earlier patch added or removed lines above the hunk."""
    numbers = [n for n, _ in ref.lines]
    expected = [t for _, t in ref.lines]
    mismatches = [(n, t) for n, t in ref.lines if n > len(lines) or lines[n - 1] != t]
    named = dict(number=ref.number, order=ref.order, start=ref.start)
    if not mismatches:
        return HunkDrift(ref.patch, ref.header, "in-place", "all its lines are where the pin says", **named)
    contiguous = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    if contiguous:
        hits = find_block(lines, expected)
        if len(hits) == 1:
            delta = hits[0] - numbers[0]
            return HunkDrift(
                ref.patch,
                ref.header,
                "moved",
                f"its {len(numbers)} lines, pinned at line {numbers[0]}, now start at line {hits[0]} "
                f"({delta:+d} lines)",
                **named,
                pinned_at=numbers[0],
                found_at=hits[0],
                delta=delta,
            )
        if len(hits) > 1:
            return HunkDrift(
                ref.patch,
                ref.header,
                "ambiguous",
                f"its {len(numbers)} lines, pinned at line {numbers[0]}, occur at lines {', '.join(map(str, hits))}",
                **named,
            )
    n, want = mismatches[0]
    found = _show(lines[n - 1]) if n <= len(lines) else "end of file"
    more = f" (and {len(mismatches) - 1} more lines differ)" if len(mismatches) > 1 else ""
    return HunkDrift(
        ref.patch, ref.header, "changed", f"line {n}: expected {_show(want)}, found {found}{more}", **named
    )


def explain_file(plan: FilePlan, lines: list[bytes]) -> list[HunkDrift]:
    """One explanation per hunk, in the file's line order (as a reader goes down the file)."""
    refs = sorted(plan.hunk_refs, key=lambda ref: min(n for n, _ in ref.lines))
    return [explain_hunk(ref, lines) for ref in refs]


def first_in_series(drifts: list[HunkDrift]) -> HunkDrift:
    """The drift the series meets first as it applies its patches in order."""
    return min(drifts, key=lambda d: (d.order, d.number))
