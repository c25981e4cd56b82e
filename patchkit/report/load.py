"""Read a directory of phase-timer JSON-lines files (one per process/rank).

Events-mode files carry a cycle's device times in a later "dev" record keyed by the cycle
index; loading merges it into the cycle and its phase records (in the order they were
written). A cycle whose "dev" record never came (the process was killed first) keeps
dev_ns null and is counted in `ProcessTiming.unresolved`. A "rank" record (the rank became
known after the header) overrides the header's rank. A record repeated by a write that a
KeyboardInterrupt cut short after the data reached the file is dropped (`repeated`).
"sampling" records (PATCHKIT_TIMER_BUDGET: the timed probability from a cycle index on) are
kept in order in `ProcessTiming.sampling_changes`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import InvalidInput

SCHEMA = "patchkit.timing/1"
FILE_GLOB = "phase-timing.rank*.pid*.jsonl"


@dataclass
class ProcessTiming:
    """Everything one process wrote: its header, phases, cycles, notes and exit stats."""

    path: Path
    header: dict
    phases: list[dict] = field(default_factory=list)
    cycles: list[dict] = field(default_factory=list)
    notes: list[dict] = field(default_factory=list)
    stats: dict | None = None
    truncated_lines: int = 0
    repeated: int = 0
    orphan_dev: int = 0  # dev records whose cycle record is not in the file
    duplicates: list[str] = field(default_factory=list)  # copies of this file, read once
    sampling_changes: list[dict] = field(default_factory=list)  # "sampling" records

    @property
    def timed_cycles(self) -> list[dict]:
        """Cycles with phases timed: all but the off blocks of PATCHKIT_TIMER_AB and the
        cycles that sampled timing (PATCHKIT_TIMER_SAMPLE) left untimed ("timed": false)."""
        return [c for c in self.cycles if c.get("ab") != "off" and c.get("timed") is not False]

    @property
    def unresolved(self) -> int:
        """Events/sync-mode timed cycles without device time (process ended first)."""
        if self.mode not in ("events", "sync"):
            return 0
        return sum(1 for c in self.timed_cycles if c.get("dev_ns") is None)

    @property
    def rank(self) -> int:
        return int(self.header.get("rank") or 0)

    @property
    def mode(self) -> str:
        return self.header.get("mode", "host")

    def wall_ns(self, t: int) -> int:
        """Map this process's perf_counter_ns to wall-clock ns (aligns ranks)."""
        clock = self.header["clock"]
        return clock["wall_t0_ns"] + (t - clock["host_t0_ns"])


def _parse_line(path: Path, lineno: int, line: str, is_last: bool):
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        if is_last:  # a process killed mid-write leaves half a line: skip it, count it
            return None
        raise InvalidInput(f"{path}:{lineno}: not a JSON record ({exc.msg})") from exc
    if not isinstance(rec, dict) or "kind" not in rec:
        raise InvalidInput(f"{path}:{lineno}: record has no 'kind'")
    return rec


def load_file(path: Path) -> ProcessTiming:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise InvalidInput(f"{path}: empty timing file")
    header = _parse_line(path, 1, lines[0], is_last=False)
    if header.get("kind") != "header":
        raise InvalidInput(f"{path}:1: first record must be the header, found {header.get('kind')!r}")
    if header.get("schema") != SCHEMA:
        raise InvalidInput(f"{path}:1: schema {header.get('schema')!r}, expected {SCHEMA!r}")
    proc = ProcessTiming(path=path, header=dict(header))
    seen: set = set()  # keys of the few records without an ordering to tell repeats by
    last_cycle = -1  # highest cycle index with a cycle record so far
    cycle_by_index: dict = {}
    phases_by_cycle: dict = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        rec = _parse_line(path, lineno, line, is_last=lineno == len(lines))
        if rec is None:
            proc.truncated_lines += 1
            continue
        kind = rec["kind"]
        if kind == "phase":
            # a cycle's phase lines come right before its cycle record, so one at or below
            # the last cycle already read repeats an earlier write (captured graph steps and
            # phases outside cycles come later or alone: compared by key)
            cyc = rec.get("cycle")
            if cyc is not None and not rec.get("captured"):
                if cyc <= last_cycle:
                    proc.repeated += 1
                    continue
            else:
                key = (
                    cyc,
                    rec.get("name"),
                    rec.get("depth"),
                    rec.get("t0"),
                    rec.get("t1"),
                    rec.get("dev_off_ns"),
                    rec.get("dev_ns"),
                )
                if key in seen:
                    proc.repeated += 1
                    continue
                seen.add(key)
            proc.phases.append(rec)
            if rec.get("cycle") is not None and not rec.get("captured"):
                phases_by_cycle.setdefault(rec["cycle"], []).append(rec)
        elif kind == "cycle":
            if rec["cycle"] in cycle_by_index:
                proc.repeated += 1
                continue
            cycle_by_index[rec["cycle"]] = rec
            last_cycle = max(last_cycle, rec["cycle"])
            proc.cycles.append(rec)
        elif kind == "dev":
            _merge_dev(proc, rec, cycle_by_index, phases_by_cycle)
        elif kind == "note":
            proc.notes.append(rec)
        elif kind == "rank":
            for k in ("rank", "world_size", "rank_source"):
                proc.header[k] = rec.get(k)
        elif kind == "stats":
            proc.stats = rec
        elif kind == "sampling":
            proc.sampling_changes.append(rec)
        elif kind == "header":
            if rec == header:  # the first write repeated (see the module docstring)
                proc.repeated += 1
                continue
            raise InvalidInput(f"{path}:{lineno}: a second header (two processes wrote one file?)")
    return proc


def _merge_dev(proc, rec, cycle_by_index, phases_by_cycle):
    cycle = cycle_by_index.get(rec.get("cycle"))
    if cycle is None:
        proc.orphan_dev += 1
        return
    if cycle.get("dev_ns") is not None:
        proc.repeated += 1
        return
    cycle["dev_ns"] = rec.get("dev_ns")
    cycle["dev_gap_ns"] = rec.get("dev_gap_ns")
    if rec.get("attrs"):
        cycle["attrs"] = {**(cycle.get("attrs") or {}), **rec["attrs"]}
    for phase, (dev, off) in zip(phases_by_cycle.get(rec["cycle"], []), rec.get("phases") or []):
        phase["dev_ns"], phase["dev_off_ns"] = dev, off


def load_timing_dir(timing_dir) -> list[ProcessTiming]:
    """All processes' timing in `timing_dir`, ordered by rank then pid."""
    root = Path(timing_dir)
    if not root.is_dir():
        raise InvalidInput(f"{root}: timing directory does not exist")
    files = sorted(root.glob(FILE_GLOB))
    if not files:
        raise InvalidInput(f"{root}: no timing files ({FILE_GLOB})")
    procs = _drop_copies([load_file(p) for p in files])
    procs.sort(key=lambda p: (p.rank, int(p.header.get("pid") or 0)))
    return procs


def _identity(proc: ProcessTiming):
    """What only one process can have written: host, boot, pid and the clock readings taken
    when its timer started (None when the header lacks any of them)."""
    h, clock = proc.header, proc.header.get("clock") or {}
    key = (
        h.get("host"),
        clock.get("boot_id"),
        h.get("pid"),
        clock.get("host_t0_ns"),
        clock.get("wall_t0_ns"),
    )
    return None if any(v is None for v in key) else key


def _drop_copies(procs: list[ProcessTiming]) -> list[ProcessTiming]:
    """Two files with one process's header are copies of one file (an interrupted fetch that
    ran again kept both, a hand copy): read the longer one once, name the others on it."""
    by_key: dict = {}
    kept = []
    for proc in procs:
        key = _identity(proc)
        if key is None:
            kept.append(proc)
            continue
        by_key.setdefault(key, []).append(proc)
    for group in by_key.values():
        group.sort(key=lambda p: (-(len(p.cycles) + len(p.phases)), p.path.name))
        group[0].duplicates = [p.path.name for p in group[1:]]
        kept.append(group[0])
    return kept


def timing_folder(given, say=None, option: str = "--timing") -> Path:
    """The folder of timing files ``--timing`` names: the folder itself, or the ``timing/`` of a
    run folder (profile.run's or profile.remote's ``OUT/<timestamp>``), said through ``say``.
    Neither: InvalidInput naming the folders below it that hold timing files, if any;
    ``option`` names the argument in the messages."""
    given = Path(given)
    if not given.is_dir():
        raise InvalidInput(f"{option} {given}: no such folder")
    if any(given.glob(FILE_GLOB)):
        return given
    inner = given / "timing"
    if inner.is_dir() and any(inner.glob(FILE_GLOB)):
        if say:
            say(f"profile: {option} {given} is a run folder: reading its timing/ ({inner})")
        return inner
    found = sorted({p.parent for depth in ("*/", "*/*/", "*/*/*/") for p in given.glob(depth + FILE_GLOB)})
    hint = ""
    if found:
        shown = ", ".join(str(p) for p in found[:3]) + (
            f" and {len(found) - 3} more" if len(found) > 3 else ""
        )
        hint = f"; below it: {shown} (give one of them as {option})"
    raise InvalidInput(f"{option} {given}: no timing files ({FILE_GLOB}) in it or in its timing/{hint}")
