"""REBASE.md: what patch.rebase did, hunk by hunk (deterministic text: no times, no temp paths)."""

from __future__ import annotations

from patchkit.author.rebase_result import HunkOutcome, RebaseResult


def _fence(text: str, lang: str = "diff") -> list[str]:
    body = text.rstrip("\n")
    fence = "```"
    while fence in body:
        fence += "`"
    return [fence + lang, body, fence]


def _where(h: HunkOutcome) -> str:
    return f"{h.patch}, hunk {h.number} `{h.old_header}` of `{h.path}`"


def render_report(result: RebaseResult) -> str:
    new = result.new
    out = [f"# Rebase of {result.series_dir.name} onto {new.label}", ""]
    out += [
        f"Made by `patch.rebase` (patchkit.author.rebase) from `{result.series_dir.name}` "
        f"({result.old}) onto {new.label}.",
        "",
        f"- new upstream: {new.detail}",
        f"- old upstream, for the diffs below: {result.old_detail}",
        f"- context trim: {'on' if result.context_trim else 'off'}",
        f"- three-way merge: {'on' if result.merge else 'off'}",
        f"- structural placement of timer lines: {'on' if result.structural else 'off'}",
        f"- how the hunks moved: {_methods(result)}",
        f"- result: {result.summary().split(': ', 1)[1].split('; ')[0]}; exit code {result.exit_code}",
        "",
        "Each hunk's old lines (context and removed) were searched, as one block, in the new "
        "file with the earlier rebased patches applied. Exactly one exact match relocates the "
        "hunk (*exact*). "
        + (
            "A hunk with none or several was then merged by `git merge-file` (old file, old "
            "file with the hunk, new file) and kept only when the merge had no conflict, every "
            "added or removed line sits in the same function (qualified name), the same branch "
            "and between the same two statements (normalised with `ast.unparse`) as before, and "
            "the file compiles (*merged+checked*). "
            if result.merge
            else "The three-way merge was off (exact match only). "
        )
        + (
            "A hunk still open whose only changes are added timer lines was then placed by "
            "structure, as seriesgen places a release's lines: each line by its function "
            "(qualified name) and the statement next to it (by text, shape or called name), "
            "exactly one candidate or none, a phase whole or not at all, kept only when the "
            "hunk's lines keep their order, the file compiles and every function's timer calls "
            "come in an order the old patched file has them in (*structural*). "
            if result.structural
            else ""
        )
        + "Anything else is left for a person: such a hunk is kept in its patch behind a "
        "`<<<<<<< patchkit rebase` context line (so verify and git apply refuse it) until edited "
        "(*by hand*, after `--resume`).",
        "",
        "The *how* of each hunk, in one word: exact, merge3 (merged+checked), structural, "
        "by hand, refused (needs attention).",
        "",
        "## Pin",
        "",
    ]
    out += [f"- {c}" for c in result.pin_changes] or ["- unchanged (same release)"]
    out += [""] + _hunk_sections(result, "##")
    return "\n".join(out).rstrip("\n") + "\n"


def _methods(result: RebaseResult) -> str:
    counts: dict[str, int] = {}
    for h in result.hunks:
        counts[h.how] = counts.get(h.how, 0) + 1
    order = ("exact", "merge3", "structural", "by hand", "refused")
    return ", ".join(f"{counts.get(m, 0)} {m}" for m in order)


RESUME_HEADING = "## Resume"
CURRENT = "**Now, after --resume:**"


def render_resume(result: RebaseResult, previous: str) -> str:
    """The earlier REBASE.md up to its Resume section, and a new Resume section."""
    idx = previous.find("\n" + RESUME_HEADING)
    kept = (previous[: idx + 1] if idx >= 0 else previous).rstrip("\n") + "\n"
    # the first run's result stays as history; the top says what holds now
    now = (
        f"{CURRENT} {result.summary().split(': ', 1)[1].split('; ')[0]}; exit code "
        f"{result.exit_code} (see the Resume section at the end)."
    )
    lines = [ln for ln in kept.split("\n") if not ln.startswith(CURRENT)]
    lines = [
        ("- result of the first run:" + ln[len("- result:") :]) if ln.startswith("- result:") else ln
        for ln in lines
    ]
    kept = "\n".join(lines[:1] + ["", now] + lines[1:])
    edited = sorted({h.patch for h in result.hunks if h.edited})
    out = [
        RESUME_HEADING + f": {result.series_dir.name} onto {result.new.label} again",
        "",
        "`patch.rebase --resume` took these patches from this folder as edited (or accepted) "
        "here: " + (", ".join(edited) or "none") + ". Their hunks stay at their line numbers "
        "where they match there exactly, and are relocated by exact match otherwise; the "
        "other patches were rebased from the old series again.",
        "",
        f"Result: {result.summary().split(': ', 1)[1].split('; ')[0]}; exit code {result.exit_code}.",
        "",
    ]
    out += _hunk_sections(result, "###")
    return kept + "\n" + "\n".join(out).rstrip("\n") + "\n"


def _hunk_sections(result: RebaseResult, level: str) -> list[str]:
    hunks = result.hunks
    out: list[str] = []
    out += [
        f"{level} Hunks",
        "",
        "| patch | file | hunk | was | now | how | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for h in hunks:
        file = h.path.rsplit("/", 1)[-1]
        now = "—" if not h.relocated else f"`{h.new_header}`"
        result_text = h.describe().replace("|", "\\|")
        out.append(
            f"| {h.patch} | {file} | {h.number} | `{h.old_header}` | {now} | {h.how} | {result_text} |"
        )
    attention = [h for h in hunks if not h.relocated]
    out += ["", f"{level} Needs attention", ""]
    if not attention:
        out += ["Nothing: every hunk relocated.", ""]
    for h in attention:
        out += [f"{level}# {_where(h)}", "", h.reason[0].upper() + h.reason[1:] + ".", ""]
        if h.candidates:
            out += [
                "Candidates (line numbers in the new file after the earlier rebased "
                "patches): " + "; ".join(str(c) for c in h.candidates) + ".",
                "",
            ]
        elif h.hunk_text:
            out += ["No place in the new file lines up with half of its lines.", ""]
        if h.hunk_text:
            out += ["The hunk as it was:", ""] + _fence(h.hunk_text) + [""]
        if h.upstream_diff:
            out += ["Upstream change around its old location:", ""] + _fence(h.upstream_diff) + [""]
        elif h.hunk_text and not h.edited:
            why = (
                "upstream changed nothing within 8 lines of its old location"
                if result.old_available
                else f"the old upstream files are not available ({result.old_detail})"
            )
            out += [f"No upstream diff to show: {why}.", ""]
    warned = [h for h in hunks if h.warnings]
    out += [f"{level} Warnings", ""]
    if not warned:
        out += ["None: no relocated hunk inserts a name that the new release dropped.", ""]
    for h in warned:
        out += [f"- {_where(h)}: " + "; ".join(h.warnings)]
    if warned:
        out += [
            "",
            "A relocated hunk that uses a name upstream removed is likely to fail at "
            "run time even though it applies: check these by hand.",
            "",
        ]
    return out
