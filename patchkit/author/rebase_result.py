"""What patch.rebase found: the upstream files of a release (Source) and the outcome per hunk,
patch and run. Its own module so that the report (rebase_report) and the rebase itself both
read these types without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patchkit.author.relocate import Candidate
from patchkit.errors import EXIT_OK, EXIT_REFUSED


@dataclass
class Source:
    """The upstream files of one release: checkout path -> bytes (None: not in that release)."""

    label: str
    detail: str
    version: str | None
    commit: str | None
    files: dict[str, bytes | None]


@dataclass
class HunkOutcome:
    patch: str
    path: str
    number: int  # 1-based within its file diff
    old_header: str
    status: str  # unchanged | moved | merged | placed | carried | needs-attention
    new_header: str = ""
    delta: int = 0  # new source line - old source line
    trimmed: tuple[int, int] | None = None
    reason: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    hunk_text: str = ""
    upstream_diff: str = ""
    warnings: list[str] = field(default_factory=list)
    edited: bool = False  # taken from the hand-edited new series (--resume)
    proof: str = ""  # merged / placed: what the structural check found
    lines_key: tuple = ()  # the written hunk's lines, to compare runs (--resume)
    via: str = ""  # edited: the method a fresh run gives these same lines

    @property
    def relocated(self) -> bool:
        return self.status != "needs-attention"

    @property
    def method(self) -> str:
        """How it moved: exact | merged+checked | structural | by hand | needs attention."""
        if not self.relocated:
            return "needs attention"
        if self.edited:
            return self.via or "by hand"
        return {"merged": "merged+checked", "placed": "structural"}.get(self.status, "exact")

    @property
    def how(self) -> str:
        """The step that placed it, in one word: exact | merge3 | structural | by hand |
        refused."""
        return {"merged+checked": "merge3", "needs attention": "refused"}.get(self.method, self.method)

    def describe(self) -> str:
        if self.status == "needs-attention":
            return f"needs attention: {self.reason}"
        if self.status == "carried":
            return "carried over unchanged (creates the file)"
        if self.status == "merged":
            return f"merged+checked, moved by {self.delta:+d} lines ({self.proof})"
        if self.status == "placed":
            return f"placed by structure, moved by {self.delta:+d} lines ({self.proof})"
        text = "unchanged" if self.status == "unchanged" else f"moved by {self.delta:+d} lines"
        if self.edited:
            text = "as edited, " + text
        if self.trimmed:
            lead, trail = self.trimmed
            text += (
                f" (context trimmed: {lead} leading, {trail} trailing line(s) dropped to "
                "find a unique match, then refilled from the new file)"
            )
        return text


@dataclass
class PatchOutcome:
    name: str
    hunks: list[HunkOutcome] = field(default_factory=list)
    identical: bool = False  # the written bytes equal the old patch's

    @property
    def needs_attention(self) -> bool:
        return any(not h.relocated for h in self.hunks)


@dataclass
class RebaseResult:
    series_dir: Path
    out_dir: Path
    old: str  # label of the old pin, e.g. "sglang 0.5.9"
    new: Source
    old_detail: str
    context_trim: bool
    patches: list[PatchOutcome]
    pin_changes: list[str]
    written: bool
    noop: bool
    old_available: bool = False
    resumed: bool = False
    report: str = ""
    merge: bool = True
    structural: bool = True

    @property
    def hunks(self) -> list[HunkOutcome]:
        return [h for p in self.patches for h in p.hunks]

    @property
    def attention(self) -> list[HunkOutcome]:
        return [h for h in self.hunks if not h.relocated]

    @property
    def exit_code(self) -> int:
        return EXIT_REFUSED if self.attention else EXIT_OK

    def summary(self) -> str:
        hunks = self.hunks
        moved = sum(1 for h in hunks if h.status == "moved")
        same = sum(1 for h in hunks if h.status in ("unchanged", "carried"))
        merged = sum(1 for h in hunks if h.status == "merged")
        placed = sum(1 for h in hunks if h.status == "placed")
        trimmed = sum(1 for h in hunks if h.trimmed)
        warn = sum(len(h.warnings) for h in hunks)
        text = (
            f"{self.series_dir.name} -> {self.new.label}: {len(hunks)} hunks, {moved} moved, "
            f"{same} unchanged, "
            + (f"{merged} merged+checked, " if merged else "")
            + (f"{placed} placed by structure, " if placed else "")
            + f"{len(self.attention)} need attention"
        )
        if trimmed:
            text += f", {trimmed} placed after trimming context"
        if warn:
            text += f", {warn} warning(s)"
        if self.noop:
            text += "; no-op (same release), nothing written"
        elif self.written:
            text += f"; written to {self.out_dir}"
        return text
