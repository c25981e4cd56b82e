"""Generate an SGLang release's series from a neighbouring release's series, by structure.

    python -m patchkit.author.seriesgen 0.5.22 [0.5.21 ...]   # or --all; writes patches/sglang-vX/

For each release in patchkit.author.sglang_releases: read its worker files from the pinned wheel, learn
where the reference series puts each timer line (patchkit.author.timerplace), place the same lines in
the release's files, and write the folder: the 0001 runtime patch's marker (the patch is rendered
from patchkit/timing/phase_timer.py on every read), the phase patches with the
reference's names and headers, pin.toml and series, and README.md saying which lines the tool
placed, which a hand rule placed, and which phases are absent and why. The result is checked
before it is written: every patch applies exactly, each patched file compiles, and the files pass
the static proof (patchkit.author.phaseproof).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import upstream
from patchkit.author import authoring, phaseproof, sglang_releases as rel, timerplace
from patchkit.boundary import main_boundary
from patchkit.engine.runtime_patch import RUNTIME_PATCH
from patchkit.errors import InvalidInput, PatchkitError
from patchkit.locations import series_root

PATCHES = series_root()

# The phases of the 0.5.9 series (and both cycle kinds): what every release should time.
EXPECTED = (
    "cycle:decode",
    "cycle:prefill",
    "draft_preprocess",
    "draft_forward",
    "draft_step",
    "build_tree",
    "verify_prepare",
    "target_verify",
    "accept",
    "draft_extend_after_decode",
    "draft_extend_forward",
    "target_extend",
    "draft_extend",
)


def release_files(version: str, paths: list[str]) -> dict[str, str]:
    """Checkout path -> text, read from the pinned wheel (fetched into the cache once)."""
    wheel = upstream.fetch_wheel("sglang", version)
    data = upstream.read_wheel_files(wheel.path, [rel.wheel_path(p) for p in paths])
    return {p: data[rel.wheel_path(p)].decode("utf-8") for p in paths}


@dataclass
class Reference:
    series: str
    version: str
    names: list[str]
    headers: dict[str, str]
    anchors: list[timerplace.Anchor]


MAX_EXTRA_REFS = 3


def _newer_series(release: rel.Release, family: tuple[str, ...]) -> list[str]:
    """Series folders of newer releases that pin a file of ``family``, nearest first."""
    out = []
    for r in reversed(rel.RELEASES[: rel.RELEASES.index(release)]):
        if r.series in out or rel.owner(r) is not r or not (PATCHES / r.series / "pin.toml").is_file():
            continue
        pinned = [Path(f).name for f in upstream.read_pin(PATCHES / r.series / "pin.toml").files]
        if any(name in pinned for name in family):
            out.append(r.series)
    return out


def load_reference(series: str, only: tuple[str, ...]) -> Reference:
    sdir = PATCHES / series
    pin = upstream.read_pin(sdir / "pin.toml")
    if pin.version is None:
        raise PatchkitError(f"{series}: its pin.toml has no version, so no wheel to read it from")
    paths = list(pin.files)
    pristine = release_files(pin.version, paths)
    names = authoring.read_series_names(sdir)
    states = [pristine]
    headers = {}
    for name in names:
        text = authoring.read_patch(sdir, name)
        headers[name] = authoring.split_header(text)[0]
        states.append(authoring.apply_patch(states[-1], text, str(sdir / name)))
    anchors = []
    for path in paths:
        if Path(path).name not in only:
            continue
        origins = timerplace._line_origins(states, names, path)
        anchors += timerplace.learn(path, states[-1][path], origins)
    return Reference(series, pin.version, names, headers, anchors)


@dataclass
class Generated:
    version: str
    series: str
    placed_by_tool: int = 0
    placed_by_hand: int = 0
    missing: list[str] = field(default_factory=list)
    phases: dict[str, list[str]] = field(default_factory=dict)  # file name -> phases
    absent: list[str] = field(default_factory=list)
    adjusted_by_hand: int = 0  # placed by the tool, text adjusted by a rename rule


def _phases_of(text: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and timerplace.is_timer_stmt(node):
            call, phase = timerplace.timer_kind(node)
            label = phase if call == "begin" else ("cycle" if call == "cycle_begin" else "")
            if label and label not in out:
                out.append(label)
    return out


def _generated(release, result, final_texts: dict) -> Generated:
    """What a generation run placed, by whom, and which phases the final files hold."""
    gen = Generated(release.version, release.series)
    gen.placed_by_tool = sum(1 for p in result.placements if p.how.startswith("tool"))
    gen.placed_by_hand = sum(1 for p in result.placements if p.how.startswith("hand"))
    gen.adjusted_by_hand = sum(1 for p in result.placements if "[hand:" in p.how)
    gen.missing = [f"{Path(a.path).name} {a.function}: `{a.text}` ({why})" for a, why in result.missing]
    gen.phases = {Path(p).name: _phases_of(t) for p, t in final_texts.items()}
    return gen


def generate(release: rel.Release, out_dir: Path | None = None) -> Generated:
    out_dir = Path(out_dir or PATCHES / release.series)
    pristine = release_files(release.version, list(release.files))
    targets = {p: timerplace.Target(p, t) for p, t in pristine.items()}
    refs: list[Reference] = []
    result, done = timerplace.Result(), set()
    for n, rule in enumerate(release.hand):
        result.placements.append(timerplace._place_hand(rule, targets, 10_000 + n))

    for family, first in ((V1_FAMILY, release.v1_ref), (V2_FAMILY, release.v2_ref)):
        if first:
            done |= _place_family(release, targets, family, first, refs, result)
    _drop_open_phases(pristine, result)
    import_text = next(a.text for r in refs for a in r.anchors if a.call == "import")
    timerplace.add_imports(import_text, result, targets)
    names = []
    for r in refs:
        names += [n for n in r.names if n not in names]
    names = [RUNTIME_PATCH] + sorted(n for n in names if n != RUNTIME_PATCH)
    states = timerplace.render_states(pristine, result.placements, names[1:])
    headers = [_header(release, refs, n) for n in names[1:]]
    texts = timerplace.patch_texts(states, headers)
    kept = [(n, t) for n, t in zip(names[1:], texts) if t]
    for path, text in states[-1].items():
        compile(text, path, "exec")
    check_proof(release, states[-1])
    _write(release, out_dir, refs, kept, pristine, result)
    gen = _generated(release, result, states[-1])
    _write_readme(release, out_dir, refs, result, gen)
    return gen


def check_proof(release: rel.Release, files: dict[str, str]) -> None:
    """The static proof (patchkit.author.phaseproof) of the files as placed (checkout path ->
    text): a phase left open on some path, or a line no call reaches, is refused before
    anything is written."""
    proof = phaseproof.prove_files(
        release.series, "sglang", release.version, {rel.wheel_path(p): t for p, t in files.items()}
    )
    if not proof.ok:
        raise PatchkitError(
            f"{release.version}: the placed lines fail the static proof: "
            + "; ".join(map(str, proof.findings))
        )


V1_FAMILY = ("eagle_worker.py",)
V2_FAMILY = ("eagle_worker_v2.py", "eagle_worker_common.py")


def _place_family(
    release: rel.Release,
    targets: dict,
    family: tuple[str, ...],
    first: str,
    refs: list,
    result: timerplace.Result,
) -> set:
    """Place the lines of one worker family from ``first`` (then up to MAX_EXTRA_REFS newer
    series, for phases the first could not give) into ``targets``; returns the identities placed."""
    chain = [first] + [s for s in _newer_series(release, family) if s != first][:MAX_EXTRA_REFS]
    family_done = {i for rule in release.hand if Path(rule.path).name in family for i in rule.identity}
    for k, series in enumerate(chain):
        ref = load_reference(series, family)
        part = timerplace.place(
            ref.anchors,
            targets,
            {p: p for p in targets},
            aliases={**rel.MOVED_FUNCTIONS, **release.aliases},
            skip_identities=family_done,
            renames=release.renames,
        )
        if k == 0:
            refs.append(ref)
            result.missing += part.missing
            result.skipped += part.skipped
        elif part.placements:
            refs.append(ref)
            for p in part.placements:
                p.how += f" [anchors of {series}]"
        got = {i for p in part.placements for i in timerplace._anchor(p).identity}
        family_done |= got
        result.placements += part.placements
        if k == 0:
            continue
        # A later reference that placed a phase clears the first reference's miss for it.
        result.missing = [(a, w) for a, w in result.missing if not got & set(a.identity)]
    return family_done


def _drop_open_phases(pristine: dict[str, str], result: timerplace.Result) -> None:
    """Take out every phase that some return (or the function's end) would leave open."""
    for _ in range(5):
        state = _all_inserted(pristine, result.placements)
        bad = set()
        for path, text in state.items():
            for fn, _line, names in timerplace.open_at_returns(text):
                for p in result.placements:
                    if (
                        p.path == path
                        and p.anchor is not None
                        and p.group.split(":")[0].endswith(fn)
                        and any(
                            (n == "cycle" and p.group.endswith(":cycle")) or p.group.endswith(":" + n)
                            for n in names
                        )
                    ):
                        bad.add(p.group)
        if not bad:
            return
        for p in [p for p in result.placements if p.group in bad]:
            assert p.anchor is not None, "only placements with an anchor are marked bad above"
            result.placements.remove(p)
            result.missing.append((p.anchor, "a return would leave the phase open"))


def _all_inserted(pristine: dict[str, str], placements: list) -> dict[str, str]:
    return timerplace.render_states(pristine, placements, sorted({p.patch for p in placements}))[-1]


def _root(series: str, family: str) -> str:
    """The hand-made series at the end of a reference chain (its headers describe the phases)."""
    seen = set()
    while series not in seen:
        seen.add(series)
        release = next((r for r in rel.RELEASES if r.series == series and rel.owner(r) is r), None)
        if release is None or not release.generated:
            return series
        nxt = release.v1_ref if family == "v1" else release.v2_ref
        if not nxt:
            return series
        series = nxt
    return series


def _header(release: rel.Release, refs: list[Reference], name: str) -> str:
    """A "Generated by" line, then per worker family the patch header of the hand-made series
    its reference chain starts from (headers are not carried along the chain)."""
    parts = []
    chains = (
        ("v1", "eagle_worker.py", release.v1_ref),
        ("v2", "eagle_worker_v2.py / eagle_worker_common.py", release.v2_ref),
    )
    for family, files, first in chains:
        if not first:
            continue
        root = _root(first, family)
        text = (
            authoring.split_header(authoring.read_text(PATCHES / root / name))[0]
            if (PATCHES / root / name).is_file()
            else ""
        )
        if text.strip():
            parts.append(
                f"{files}: as described for {root} (function names there may differ; "
                f"this release's are in README.md):\n{text.strip()}\n"
            )
    lead = (
        f"Generated by patchkit.author.seriesgen for sglang {release.version}: the timer lines of "
        f"{', '.join(dict.fromkeys(r.series for r in refs))} placed by function and anchor "
        "statement.\n\n"
    )
    return lead + "\n".join(parts) + "\n"


def _write(release, out_dir: Path, refs, kept, pristine, result) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.patch"):
        old.unlink()
    for name, text in kept:
        authoring.write_text(out_dir / name, text)
    (out_dir / "series").write_text(
        f"# SGLang v{release.version} EAGLE worker phase timing (quilt order; generated by "
        "patchkit.author.seriesgen)\n" + "".join(n + "\n" for n in [RUNTIME_PATCH] + [n for n, _ in kept])
    )
    # The runtime patch as the reference stores it: its marker (rendered from patchkit/timing on
    # every read), or a file regenerated from patchkit/timing below (patch.gen-runtime).
    authoring.copy_patch(PATCHES / refs[0].series, out_dir, RUNTIME_PATCH)
    touched = sorted({p.path for p in result.placements})
    sharing = [r.version for r in rel.RELEASES if r.series == release.series and r is not release]
    pin = upstream.Pin(
        "sglang",
        release.version,
        None,
        "python/",
        {
            p: upstream.PinnedFile(
                p, upstream.sha256_bytes(pristine[p].encode()), upstream.count_lines(pristine[p].encode())
            )
            for p in touched
        },
        tuple(sorted(sharing, key=rel.version_key)),
    )
    (out_dir / "pin.toml").write_text(upstream.format_pin(pin))
    authoring.regenerate_runtime_patches(out_dir)
    # The stack must apply exactly onto the pristine files (the engine's own check runs in tests).
    stack_states = [dict(pristine)]
    for name in authoring.read_series_names(out_dir):
        stack_states.append(
            authoring.apply_patch(stack_states[-1], authoring.read_patch(out_dir, name), name)
        )


FAMILIES = {"eagle_worker.py": V1_FAMILY, "eagle_worker_v2.py (+ eagle_worker_common.py)": V2_FAMILY}


def _write_readme(release, out_dir: Path, refs, result, gen: Generated) -> None:
    lines = _readme_lines(release, refs, result, gen, FAMILIES)
    (out_dir / "README.md").write_text("\n".join(lines) + "\n")


def _readme_lines(
    release, refs, result, gen: Generated, families: dict, appended=None, base=None
) -> list[str]:
    made_from = ", ".join(dict.fromkeys(f"`{r.series}` (sglang {r.version})" for r in refs))
    how = (
        "Every timer line was placed by function (qualified name) and the statement next to it "
        "(compared by `ast.unparse`), never by line number; a phase is placed whole or not at all."
    )
    lines, sub = _readme_head(release, made_from, how, appended, base)
    lines += [f"{sub} Phases per file", "", "| file | phases timed |", "|---|---|"]
    for name, phases in gen.phases.items():
        lines.append(f"| {name} | {', '.join(phases) or '(none)'} |")
    lines += [
        "",
        f"{sub} Placement: {gen.placed_by_tool} lines by the tool "
        f"({gen.adjusted_by_hand} of them with text adjusted by hand), {gen.placed_by_hand} by hand",
        "",
        "| patch | file | line | how |",
        "|---|---|---|---|",
    ]
    for p in sorted(result.placements, key=lambda p: (p.patch, p.path, p.line, p.order)):
        lines.append(f"| {p.patch} | {Path(p.path).name} | `{p.text.strip()}` | {p.how} |")
    lines += _absent_lines(release, refs, result, gen, families, sub)
    lines += _unplaced_lines(release, result, families, sub)
    return lines


def _readme_head(release, made_from: str, how: str, appended, base) -> tuple[list[str], str]:
    """The README's opening: a generated series' title and origin, or (``appended``) the
    section on the v2 patches appended to a hand-made series; and its subheadings' level."""
    sub = "##"
    if appended is None:
        lines = [
            f"# sglang-v{release.version}: EAGLE worker phase timing (generated)",
            "",
            f"Made by `python -m patchkit.author.seriesgen {release.version}` from the files of the "
            f"pinned sglang {release.version} wheel. Reference series: " + made_from + ".",
            how,
            "",
        ]
        sharing = [r for r in rel.RELEASES if r.series == release.series and r is not release]
        if sharing:
            lines += [
                "Also serves "
                + ", ".join(f"{r.version} ({r.note})" for r in sharing)
                + "; their versions are in pin.toml's `also_versions`.",
                "",
            ]
    else:
        sub = "###"
        span = f"{appended[0][:4]}-{appended[-1][:4]}" if appended else "none"
        lines = [
            f"## EAGLEWorkerV2: patches {span} (appended by patchkit.author.seriesgen)",
            "",
            f"`{base[0]}` … `{base[-1]}` are the hand-made series (byte for byte as before; "
            "they time EAGLEWorker, `eagle_worker.py`, the default worker of this release). "
            f"This release also ships `eagle_worker_v2.py` (EAGLEWorkerV2: `SGLANG_ENABLE_SPEC_V2` "
            "defaults to off here; with it on, or where server_args turns it on itself, and the "
            "overlap scheduler with `--speculative-eagle-topk 1`, the server runs this worker). "
            f"`python -m patchkit.author.seriesgen {release.version}` placed its timer lines from the "
            f"pinned sglang {release.version} wheel's file (reference series: {made_from}) and "
            f"appended them as {', '.join(f'`{n}`' for n in appended)}, with the phase names "
            "of 0002-0007 (and the same patch names as sglang-v0.5.12's 0008-0013); pin.toml "
            "gained the file's sha256 and `wc -l`. " + how,
            "",
            "As in sglang-v0.5.12, a v2 decode cycle ends with `tokens=batch_output.accept_lens` "
            "(committed tokens per request, a device tensor) instead of v1's `accepted` host "
            "list, and its batch size is the length of `model_worker_batch.seq_lens`.",
            "",
        ]
    return lines, sub


def _absent_lines(release, refs, result, gen: Generated, families: dict, sub: str) -> list[str]:
    """The phases of the 0.5.9 series absent in this release, per worker file, and why (the
    reference lines that did not fit); records them in ``gen.absent``."""
    lines = ["", f"{sub} Phases absent in this release", ""]
    gen.absent = []
    for label, names in families.items():
        if not any(Path(f).name in names for f in release.files):
            continue
        present = {
            i
            for p in result.placements
            if Path(p.path).name in names and p.anchor is not None
            for i in getattr(p.anchor, "identity", ())
        }
        absent = [x for x in EXPECTED if x not in present]
        gen.absent += [f"{names[0]}:{x}" for x in absent]
        if not absent:
            lines.append(f"- {label}: none, every phase of the 0.5.9 series is timed.")
        for phase in absent:
            whys = [
                f"`{a.text}` in `{a.function}`: {why}"
                for a, why in result.missing
                if phase in a.identity and Path(a.path).name in names
            ]
            lines.append(
                f"- {label}: **{phase}**: "
                + (
                    "; ".join(whys[:2])
                    if whys
                    else "the nearest references ("
                    + ", ".join(r.series for r in refs)
                    + ") have no line for it that fits this release's code"
                )
            )
    return lines


def _unplaced_lines(release, result, families: dict, sub: str) -> list[str]:
    """The reference lines left out on purpose, those the tool could not place, and the worker
    files that got no timer line."""
    lines: list[str] = []
    if result.skipped:
        lines += ["", f"{sub} Reference lines with no counterpart here (left out on purpose)", ""]
        for a, why in result.skipped:
            lines.append(f"- {Path(a.path).name} `{a.function}`: `{a.text}`: {why}")
    if result.missing:
        lines += ["", f"{sub} Reference lines the tool could not place", ""]
        for a, why in result.missing:
            lines.append(f"- {Path(a.path).name} `{a.function}`: `{a.text}`: {why}")
    absent = sorted({f for f in release.files} - {p.path for p in result.placements})
    for path in absent:
        if Path(path).name in {n for names in families.values() for n in names}:
            lines.append(f"- {Path(path).name}: no timer line could be placed in it; not pinned.")
    return lines


# ----------------------------------------------------------------------------- appending v2

APPEND_MARK = (
    "<!-- v2 patches appended by patchkit.author.seriesgen: everything below is rewritten "
    "by `python -m patchkit.author.seriesgen VERSION` -->"
)
APPEND_COMMENT = "# appended by patchkit.author.seriesgen: EAGLEWorkerV2 (eagle_worker_v2.py, spec v2)"


def _is_appended(name: str) -> bool:
    return len(name) > 8 and name[:4].isdigit() and name[4:8] == "-v2-"


def appended_names(base_names: list[str]) -> dict[str, str]:
    """Reference patch name (either spelling: ``0002-cycle.patch`` of a one-stack series or
    ``0008-v2-cycle.patch`` of a two-worker one) -> the name of its appended v2 patch, numbered
    after the hand-made series: ``0008-v2-cycle.patch`` ... ``0013-v2-prefill.patch`` behind
    0001-0007, as in sglang-v0.5.12."""
    out = {}
    phases = [n for n in base_names if n != RUNTIME_PATCH]
    for k, name in enumerate(phases, len(base_names) + 1):
        suffix = name.split("-", 1)[1]
        mine = f"{k:04d}-v2-{suffix}"
        out[name] = out[mine] = mine
    return out


def _doc_name(sdir: Path) -> str:
    return "REBASE.md" if (sdir / "REBASE.md").is_file() else "README.md"


def append_v2(release: rel.Release, out_dir: Path | None = None) -> Generated:
    """Time eagle_worker_v2.py in a hand-made series (``release.append_v2``) without touching it:
    the v2 lines are placed from ``release.v2_ref`` (then newer series) and written as patches
    appended after the hand-made ones, the v2 file is pinned after the hand-made pin's files, and
    a section is appended to the folder's REBASE.md (or README.md). The hand-made part is read
    from the shipped folder (without what an earlier run appended), so a rerun is byte-identical
    and ``out_dir`` gets the whole folder."""
    sdir = PATCHES / release.series
    if release.v2_ref is None:
        raise InvalidInput(f"{release.version}: appending v2 lines needs the release's v2_ref series")
    out_dir = Path(out_dir or sdir)
    base_names = [n for n in authoring.read_series_names(sdir) if not _is_appended(n)]
    pin = upstream.read_pin(sdir / "pin.toml")
    pin.files = {p: f for p, f in pin.files.items() if Path(p).name not in V2_FAMILY}
    v2_paths = [p for p in release.files if Path(p).name in V2_FAMILY]
    pristine = release_files(release.version, v2_paths)
    refs, result, states, kept = _place_v2(release, release.v2_ref, pristine, base_names)
    for path, text in states[-1].items():
        compile(text, path, "exec")
    check_proof(release, states[-1])
    _write_appended(sdir, out_dir, base_names, kept, pin, pristine, result)
    _check_appended(release, sdir, out_dir, base_names, pin)
    gen = _generated(release, result, states[-1])
    section = _readme_lines(
        release,
        refs,
        result,
        gen,
        {"eagle_worker_v2.py": V2_FAMILY},
        appended=[n for n, _ in kept],
        base=base_names,
    )
    _append_section(release, sdir, out_dir, section)
    return gen


def _place_v2(release: rel.Release, v2_ref: str, pristine: dict[str, str], base_names: list[str]):
    """The v2 file's timer lines placed from ``v2_ref`` and newer series (the release's hand
    rules first), renamed to follow the hand-made patches: (references, result, the file's
    states patch by patch, the appended patches that change something as (name, text))."""
    targets = {p: timerplace.Target(p, t) for p, t in pristine.items()}
    refs: list[Reference] = []
    result = timerplace.Result()
    for n, rule in enumerate(release.hand):
        result.placements.append(timerplace._place_hand(rule, targets, 10_000 + n))
    _place_family(release, targets, V2_FAMILY, v2_ref, refs, result)
    rename = appended_names(base_names)
    for p in result.placements:
        if p.patch not in rename:
            raise PatchkitError(f"{release.version}: reference patch {p.patch} has no appended name")
        p.patch = rename[p.patch]
    _drop_open_phases(pristine, result)
    import_text = next(a.text for r in refs for a in r.anchors if a.call == "import")
    timerplace.add_imports(import_text, result, targets)
    names = sorted(dict.fromkeys(rename.values()))
    states = timerplace.render_states(pristine, result.placements, names)
    headers = [_appended_header(release, refs, n) for n in names]
    kept = [(n, t) for n, t in zip(names, timerplace.patch_texts(states, headers)) if t]
    return refs, result, states, kept


def _write_appended(
    sdir: Path,
    out_dir: Path,
    base_names: list[str],
    kept: list[tuple[str, str]],
    pin: upstream.Pin,
    pristine: dict[str, str],
    result: timerplace.Result,
) -> None:
    """The folder: the hand-made patches (copied where ``out_dir`` is another folder), the
    appended ones (stale ones removed), the series file and pin.toml with the v2 file pinned."""
    series_lines = (sdir / "series").read_text().splitlines(keepends=True)
    base_lines = [
        ln
        for ln in series_lines
        if ln.rstrip("\n") != APPEND_COMMENT and not _is_appended(ln.split("#", 1)[0].strip())
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    if out_dir != sdir:
        for name in base_names:
            authoring.copy_patch(sdir, out_dir, name)
    for stale in out_dir.glob("*.patch"):
        if _is_appended(stale.name):
            stale.unlink()
    for name, text in kept:
        authoring.write_text(out_dir / name, text)
    (out_dir / "series").write_text(
        "".join(base_lines) + APPEND_COMMENT + "\n" + "".join(n + "\n" for n, _ in kept)
    )
    touched = sorted({p.path for p in result.placements})
    pin.files.update(
        (
            p,
            upstream.PinnedFile(
                p, upstream.sha256_bytes(pristine[p].encode()), upstream.count_lines(pristine[p].encode())
            ),
        )
        for p in touched
    )
    (out_dir / "pin.toml").write_text(upstream.format_pin(pin))


def _check_appended(
    release: rel.Release, sdir: Path, out_dir: Path, base_names: list[str], pin: upstream.Pin
) -> None:
    """The hand-made part byte for byte, then the whole stack applies onto the release's files."""
    for name in base_names:
        if authoring.read_patch(out_dir, name) != authoring.read_patch(sdir, name):
            raise PatchkitError(f"{release.version}: {name} would change")
    full = release_files(release.version, list(pin.files))
    for name in authoring.read_series_names(out_dir):
        full = authoring.apply_patch(full, authoring.read_patch(out_dir, name), name)


def _append_section(release: rel.Release, sdir: Path, out_dir: Path, section: list[str]) -> None:
    """The folder's REBASE.md (or README.md) up to APPEND_MARK, then the appended section anew."""
    doc = _doc_name(sdir)
    old = (
        (sdir / doc).read_text()
        if (sdir / doc).is_file()
        else f"# sglang-v{release.version}: EAGLE worker phase timing\n"
    )
    (out_dir / doc).write_text(
        old.split(APPEND_MARK, 1)[0].rstrip("\n") + "\n\n" + APPEND_MARK + "\n\n" + "\n".join(section) + "\n"
    )


def _appended_header(release: rel.Release, refs: list[Reference], name: str) -> str:
    """ "Generated by", then the header of the hand-made two-worker series' patch of that name
    (sglang-v0.5.12: what the phases of EAGLEWorkerV2 mean)."""
    lead = (
        f"Generated by patchkit.author.seriesgen for sglang {release.version} (appended to the "
        f"hand-made series): the EAGLEWorkerV2 timer lines of "
        f"{', '.join(dict.fromkeys(r.series for r in refs))} placed by function and anchor "
        "statement. In this release EAGLEWorkerV2 is not the default worker (SGLANG_ENABLE_SPEC_V2 "
        "defaults to off); the phases and attributes are those of the v2 worker below.\n\n"
    )
    root = next(
        (
            r.series
            for r in rel.RELEASES
            if not r.generated
            and not r.append_v2
            and rel.owner(r) is r
            and (PATCHES / r.series / name).is_file()
        ),
        None,
    )
    if root is None:
        return lead
    text = authoring.split_header(authoring.read_text(PATCHES / root / name))[0]
    return (
        lead + f"eagle_worker_v2.py: as described for {root} (function names there may "
        f"differ; this release's are in {_doc_name(PATCHES / release.series)}):\n" + text.strip() + "\n\n"
    )


@main_boundary("seriesgen")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m patchkit.author.seriesgen", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "versions", nargs="*", help="releases to generate (default with --all: every generated one)"
    )
    ap.add_argument(
        "--all", action="store_true", help="every release marked generated or append_v2, newest first"
    )
    args = ap.parse_args(argv)
    table = rel.by_version()
    wanted = (
        [r for r in rel.RELEASES if (r.generated or r.append_v2) and rel.owner(r) is r] if args.all else []
    )
    for v in args.versions:
        if v not in table:
            raise InvalidInput(f"{v} is not in patchkit.author.sglang_releases")
        wanted.append(table[v])
    for r in wanted:
        if rel.owner(r) is not r:
            print(f"{r.version}: shares {r.series}; nothing to generate")
            continue
        if not r.generated and not r.append_v2:
            print(f"{r.version}: {r.series} is hand-made; nothing to generate")
            continue
        try:
            gen = append_v2(r) if r.append_v2 else generate(r)
        except PatchkitError as e:  # the boundary prints it, with the release named
            raise PatchkitError(f"{r.version}: {e.message}", e.exit_code) from e
        print(
            f"{r.version}: {gen.series}: {gen.placed_by_tool} by tool ({gen.adjusted_by_hand} "
            f"adjusted), {gen.placed_by_hand} by hand, "
            f"{len(gen.missing)} reference lines not placed; absent: {', '.join(gen.absent) or 'none'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
