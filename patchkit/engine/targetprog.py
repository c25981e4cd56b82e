"""Build the one shell program an operation sends to a target, and read its answer.

The program is data (quoted shell assignments, sed scripts written by printf, printf functions
for new text) followed by the static library `target.sh` and one call, `pk_run_<op>`. It is
self-contained: nothing else is sent and nothing is read back but its standard output.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from patchkit.engine.plan import FilePlan, plan_series
from patchkit.engine.render import (
    dispatch,
    extraction_script,
    lines_digest,
    post_ranges,
    pre_ranges,
    printf_lines,
    shq,
    stage_edit,
)
from patchkit.engine.series import Series
from patchkit.errors import InvalidInput
from patchkit.paths import strip_prefix

OPS = ("check", "verify", "apply", "commit", "unstage", "revert", "status", "unlock")
CHUNK = 200  # files per sed process: each holds one `w` output per file open
_ROOT_OK = re.compile(r"^/[^\0\n]*$")


@lru_cache(maxsize=1)
def library() -> str:
    with open(os.path.join(os.path.dirname(__file__), "target.sh"), encoding="utf-8") as fh:
        return fh.read()


@dataclass
class Compiled:
    """Everything about a series that does not depend on the target: computed once per run.

    Two renderings of the sed work exist. *multi* edits a chunk of files with one sed process (line
    numbers as one stream); it needs every file's exact line count, which a pinned file that ends
    without a newline (unknown unless a hunk shows that line) would break. The target notices
    (`$=` disagrees), writes nothing and asks for *single*: one sed per file. Such files are rare
    (none of sglang 0.5.9's 1,404 Python files), so the common case ships only the multi scripts.
    """

    series: Series
    plans: list[FilePlan]
    common: str
    stage_funcs: str = ""  # printf functions writing new text (apply/verify only)
    multi: dict[str, str] = field(default_factory=dict)
    single: dict[str, str] = field(default_factory=dict)
    full: bool = True  # False: file table only (check/status/revert/unlock)
    detail: Callable[[], list[FilePlan]] | None = field(default=None, repr=False)

    def detailed_plan(self, k: int) -> FilePlan:
        """File k's plan with its hunks (a cached compile keeps only the file table)."""
        if self.detail is not None:
            self.plans = self.detail()
            self.detail = None
        return self.plans[k - 1]

    def data(self, single: bool = False, scripts_needed: bool = True) -> str:
        scripts = (self.single if single else self.multi) if scripts_needed else {}
        out = [self.common, self.stage_funcs if scripts_needed else "", f"PK_SINGLE={1 if single else 0}\n"]
        out += [f"printf '%s\\n' {shq(body)} > \"$PK_T/s/{name}\"\n" for name, body in scripts.items()]
        return "".join(out)


def file_table(series: Series) -> list[FilePlan]:
    """The files a series touches, with their final kind, without composing any hunk.

    Enough for operations that read the target or work from its manifest (check, status,
    revert, unlock): they need paths, kinds and pins, not the edits.
    """
    table: dict[str, FilePlan] = {}
    for fd in series.file_diffs:
        plan = table.get(fd.path)
        if plan is None:
            table[fd.path] = FilePlan(
                path=fd.path, kind=fd.kind, pinned=series.pin.files.get(fd.path), executable=fd.executable
            )
        elif fd.kind == "delete":
            plan.kind = "delete"
    return list(table.values())


def compile_series(series: Series, full: bool = True) -> Compiled:
    """Everything the target program needs; `full=False` skips planning the edits."""
    plans = plan_series(series) if full else file_table(series)
    dirs: dict[str, int] = {}
    slots = state_slots(plans)
    digests = [["", ""] for _ in plans]  # hunk lines before / after, as the target hashes them
    lines: list[str] = []
    table: list[str] = []  # per-file data, defined only when an op needs it
    multi: dict[str, str] = {}
    single: dict[str, str] = {}
    prefix = series.pin.package_prefix
    edits = {}
    funcs: list[str] = []
    starts: list[str] = []  # stage-dir: each staged file, empty or created
    tails: dict[int, list[str]] = {}  # chunk -> appends of the new last lines
    for k, plan in enumerate(plans, 1):
        gd = dirs.setdefault(posixpath.dirname(plan.path), len(dirs) + 1)
        d = slots[k - 1]
        pinned = plan.pinned
        sha = pinned.sha256 if pinned else "-"
        nlines = pinned.lines if pinned else 0
        table.append(
            f"pk_file {k} {plan.kind} {shq(plan.path)} {shq(strip_prefix(plan.path, prefix))} "
            f"{sha} {nlines} {d} {gd}"
        )
        if not full:
            continue
        pre_x = digests[k - 1][0] = lines_digest(plan.expected_pre_lines())
        post_x = digests[k - 1][1] = lines_digest(plan.expected_post_lines())
        table.append(f"pk_expect {k} {pre_x} {post_x} {plan.post_wc}")
        if plan.kind != "delete":
            single[f"post.f{k}.sed"] = extraction_script([(f"y/{k}", post_ranges(plan), 0)], False)
        if plan.kind != "create":
            single[f"pre.f{k}.sed"] = extraction_script([(f"x/{k}", pre_ranges(plan), 0)], False)
        if plan.kind == "modify":
            edit = edits[k] = stage_edit(plan)
            base = posixpath.basename(plan.path)
            single[f"stage.f{k}.sed"] = "\n".join(edit.commands + [f"w {d}/{base}"])
            if edit.tail:
                funcs.append(f"pk_tail_{k}() {{ {printf_lines(edit.tail)}; }}")
                tails.setdefault((k - 1) // CHUNK + 1, []).append(
                    f'pk_tail_{k} >> "$1"/{shq(f"{d}/{base}")} || return 1'
                )
            starts.append(f': > "$1"/{shq(f"{d}/{base}")} || return 1')
        if plan.kind == "create":
            funcs.append(f"pk_create_{k}() {{ {printf_lines(plan.final)}; }}")
            starts.append(f'pk_create_{k} > "$1"/{shq(f"{d}/{posixpath.basename(plan.path)}")} || return 1')
    lines += _group_variables(plans, slots, dirs)
    lines += _expected_columns(plans, digests, full)
    chunks = [list(range(i + 1, min(i + CHUNK, len(plans)) + 1)) for i in range(0, len(plans), CHUNK)]
    lines.append(f"PK_N={len(plans)} PK_CHUNKS={len(chunks) if full else 0}")
    for c, members in enumerate(chunks if full else [], 1):
        pre_total, pre_files = _chunk_extraction(plans, members, "pre")
        multi[f"pre.c{c}.sed"] = extraction_script(pre_files, True)
        multi[f"stage.c{c}.sed"] = "\n".join(_chunk_stage(plans, members, slots, edits))
        multi[f"post.c{c}.sed"] = extraction_script(_chunk_extraction(plans, members, "post")[1], False)
        lines.append(f"pk_chunk_{c}={shq(' '.join(map(str, members)))} pk_pretotal_{c}={pre_total}")
    # A function: revert and status work from the manifest and never define these variables
    # (dash looks variables up in a small hash table; thousands of them slow every lookup).
    lines.insert(0, "pk_table() {\n" + "\n".join(table or [":"]) + "\n}")
    funcs.append("pk_stage_start() {\n" + "\n".join(starts + [":"]) + "\n}")
    funcs += [
        f"pk_stage_tails_{c}() {{\n" + "\n".join(tails.get(c, []) + [":"]) + "\n}"
        for c in range(1, len(chunks) + 1)
    ]
    return Compiled(
        series=series,
        plans=plans,
        common="\n".join(lines) + "\n",
        stage_funcs="".join(f + "\n" for f in funcs),
        multi=multi,
        single=single,
        full=full,
    )


def _group_variables(plans: list[FilePlan], slots: list[int], dirs: dict[str, int]) -> list[str]:
    """The shell variables naming the state slots and directories in use, the executable files,
    and the files of each kind (first letter) per state slot (pk_g*) and per directory (pk_G*)."""
    by_slot: dict[tuple[str, int], list[int]] = {}
    by_dir: dict[tuple[str, int], list[int]] = {}
    for k, plan in enumerate(plans, 1):
        by_slot.setdefault((plan.kind[0], slots[k - 1]), []).append(k)
        by_dir.setdefault((plan.kind[0], dirs[posixpath.dirname(plan.path)]), []).append(k)
    lines = [
        f"PK_DIRS={shq(' '.join(map(str, sorted(set(slots)))))}",
        f"PK_GDIRS={shq(' '.join(map(str, dirs.values())))}",
        f"PK_EXEC={shq(' '.join(str(k) for k, p in enumerate(plans, 1) if p.executable))}",
    ]
    for (kind, d), ks in by_slot.items():
        lines.append(f"pk_g{kind}_{d}={shq(' '.join(map(str, ks)))}")
    for (kind, d), ks in by_dir.items():
        lines.append(f"pk_G{kind}_{d}={shq(' '.join(map(str, ks)))}")
    return lines


def _expected_columns(plans: list[FilePlan], digests: list[list[str]], full: bool) -> list[str]:
    """What the first column of `wc -l` and of the sha256 tool must read, file after file, when
    every file is as pinned (originals) or as planned (staged results): PK_W_* for the bulk checks."""

    def column(values: list, total: bool) -> str:
        if total and len(values) > 1:
            values = values + [sum(values)]
        return shq("".join(f"{v}\n" for v in values))

    orig = [k for k, p in enumerate(plans) if p.kind != "create"]
    pinned = [plans[k].pinned for k in orig]
    assert all(f is not None for f in pinned), "every file the series does not create is pinned"
    out = [
        f"PK_W_WC={column([f.lines for f in pinned if f is not None], True)}",
        f"PK_W_SHA={column([f.sha256 for f in pinned if f is not None], False)}",
    ]
    if full:
        staged = [k for k, p in enumerate(plans) if p.kind != "delete"]
        out += [
            f"PK_W_PREX={column([digests[k][0] for k in orig], False)}",
            f"PK_W_SWC={column([plans[k].post_wc for k in staged], True)}",
            f"PK_W_POSTX={column([digests[k][1] for k in staged], False)}",
        ]
    return out


def state_slots(plans: list[FilePlan]) -> list[int]:
    """Each file's folder under .patchkit/stage and .patchkit/orig: the n-th file of a base name
    goes to folder n. Base names are unique within a folder, so one `ln`/`cp` per folder saves
    the originals of files from any number of directories."""
    seen: dict[str, int] = {}
    out = []
    for plan in plans:
        base = posixpath.basename(plan.path)
        seen[base] = seen.get(base, 0) + 1
        out.append(seen[base])
    return out


def _chunk_extraction(plans, members, side: str):
    """(output, ranges, offset) per file of a chunk, for the pre- or post-image line checks.

    pre: the original files as one stream (created files have none); post: the staged results
    (deleted files have none). Returns the stream's expected line count too.
    """
    offset, files = 0, []
    for k in members:
        plan = plans[k - 1]
        if plan.kind == ("create" if side == "pre" else "delete"):
            continue
        if side == "pre":
            files.append((f"x/{k}", pre_ranges(plan), offset))
            offset += plan.orig_known
        else:
            files.append((f"y/{k}", post_ranges(plan), offset))
            offset += plan.post_lines_known
    return offset, files


def _chunk_stage(plans, members, slots, edits):
    """One sed for many files: a jump per file (through a dispatch tree) to its own block of
    edits ending in `w`; see render.dispatch for why the jumps form a tree."""
    offset, items, blocks = 0, [], []
    for k in members:
        plan = plans[k - 1]
        if plan.kind != "modify":
            continue
        if plan.orig_known:
            edit = edits[k].shifted(offset)
            d = slots[k - 1]
            items.append((offset + 1, offset + plan.orig_known, f"s{k}"))
            blocks += [f":s{k}"] + edit + [f"w {d}/{posixpath.basename(plan.path)}", "d"]
        offset += plan.orig_known
    return dispatch(items, "g") + blocks


def build_program(
    compiled: Compiled,
    op: str,
    root: str,
    *,
    layout: str = "auto",
    force: bool = False,
    phase: str = "all",
    single: bool = False,
    keep_journal: bool = False,
) -> bytes:
    if op not in OPS:
        raise ValueError(op)
    if op in ("verify", "apply") and not compiled.full:
        raise ValueError(f"{op} needs a fully compiled series")
    if not _ROOT_OK.match(root):
        raise InvalidInput(f"target path {root!r} must be absolute and free of NUL/newline")
    if layout not in ("auto", "checkout", "installed"):
        raise InvalidInput(f"--layout must be auto, checkout or installed, not {layout!r}")
    pin = compiled.series.pin
    dist = re.sub(r"[-_.]+", "_", pin.name)
    head = [
        "#!/bin/sh",
        f"# patchkit {op}: series {compiled.series.name} ({compiled.series.digest[:12]}) on {root}",
        # first, before the rest arrives: whom the client signals when it is interrupted
        "printf '@pk pid %s\\n' \"$$\"",
        f"PK_OP={op} PK_ROOT={shq(root)} PK_WANT_LAYOUT={layout} PK_PHASE={phase}",
        f"PK_SERIES={shq(compiled.series.name)} PK_DIGEST={compiled.series.digest}",
        f"PK_COMMIT={shq(pin.commit or '')} PK_VERSION={shq(' '.join(pin.versions))} PK_DIST={shq(dist)}",
        f"PK_FORCE={1 if force else 0} PK_DUMP={1 if op in ('verify', 'apply') else 0}",
        f"PK_KEEP_JOURNAL={1 if keep_journal else 0}",
    ]
    # One brace group: sh parses it whole before running any of it, so a program cut short in
    # transit (client killed while sending) is a syntax error that runs nothing.
    program = (
        "\n".join(head)
        + "\n{\n"
        + library()
        + "\npk_init\n"
        + compiled.data(single, op in ("verify", "apply"))
        + f"pk_run_{op}\n}}\n"
    )
    return program.encode("utf-8", "surrogateescape")


__all__ = ["OPS", "Compiled", "build_program", "compile_series", "file_table"]
