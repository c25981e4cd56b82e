"""Authoring a series: make or refresh its patches from an edited copy of the pinned tree.

The stack (quilt semantics). Patch k of the series is a diff from the state after patches
1..k-1 to the state after 1..k, starting from the pristine pinned files. So when several
patches touch one file, each later patch's line numbers already include the lines the earlier
ones inserted -- exactly what ``quilt push``, ``git apply`` and ``patch -p1`` run in series
order expect.

How an edited tree maps onto the stack:
  new_patch(NAME)    the edited tree is "all patches applied, plus my new edits":
                     NAME = diff(state after 1..n, edited), appended to ``series``.
  refresh()          the edited tree is "all patches applied, with the top patch's edits
                     changed": top = diff(state after 1..n-1, edited). With ``patch=NAME`` the
                     edited tree is the state after 1..NAME; the later patches must still apply
                     unchanged (exact lines), otherwise refresh refuses and names the first one
                     that no longer applies (re-make it, or use patch.rebase).
  prepare_edit_tree  writes the state after 1..k into a folder to start editing from.

Patch headers (free text before the first ``diff --git``) are kept on refresh; the pin is
never changed here (that is upstream.pin_from_tree's job). Diffs are produced by difflib in a
fixed format (git-style a/ b/ prefixes, 3 lines of context, no function names after @@), so
refreshing an unchanged series rewrites every patch byte for byte.
"""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patchkit.author.folders import write_new_folder
from patchkit.engine import runtime_patch
from patchkit.engine.difftext import emit_line, hunk_range, new_file_patch, split_lines
from patchkit.engine.runtime_patch import RUNTIME_FILE_NAME
from patchkit.errors import InvalidInput, Refused
from patchkit.locations import PACKAGE
from patchkit.upstream import Pin, installed_path, locate_in_tree, read_pin, sha256_bytes

DEFAULT_CONTEXT = 3


class AuthoringError(Refused):
    """The edited tree, the pristine tree or the series do not fit together."""


# ----------------------------------------------------------------------------- diff text


def read_text(path: Path) -> str:
    """UTF-8 text with line endings untouched (no universal-newline translation)."""
    return _decode(Path(path).read_bytes(), str(path))


def write_text(path: Path, text: str) -> None:
    Path(path).write_bytes(text.encode("utf-8"))


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{where}: not UTF-8 text ({exc})") from exc


def file_diff(path: str, old: str, new: str, context: int = DEFAULT_CONTEXT) -> str:
    """Git-style unified diff of one modified file ('' when equal)."""
    a, b = split_lines(old), split_lines(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    hunks = []
    for group in matcher.get_grouped_opcodes(context):
        a0, a1, b0, b1 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out = [f"@@ -{hunk_range(a0, a1 - a0)} +{hunk_range(b0, b1 - b0)} @@\n"]
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [emit_line(" ", line) for line in a[i1:i2]]
                continue
            out += [emit_line("-", line) for line in a[i1:i2]]
            out += [emit_line("+", line) for line in b[j1:j2]]
        hunks.append("".join(out))
    if not hunks:
        return ""
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n" + "".join(hunks)


def split_header(patch_text: str) -> tuple[str, str]:
    """(header, diff): the header is the free text before the first ``diff --git`` line."""
    if patch_text.startswith("diff --git "):
        return "", patch_text
    idx = patch_text.find("\ndiff --git ")
    if idx < 0:
        return patch_text, ""
    return patch_text[: idx + 1], patch_text[idx + 1 :]


# ----------------------------------------------------------------------------- exact applier


def _strip_prefix(name: str, where: str) -> str | None:
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        return name[2:]
    raise InvalidInput(f"{where}: path {name!r} lacks the a/ or b/ prefix")


def apply_patch(files: dict[str, str], patch_text: str, where: str) -> dict[str, str]:
    """Apply a patch to in-memory files at its exact line numbers (no offset, no fuzz).

    ``files`` maps path -> text; a created file must be absent. Returns a new mapping.
    """
    import unidiff

    _, body = split_header(patch_text)
    try:
        patchset = unidiff.PatchSet(body)
    except unidiff.UnidiffParseError as exc:
        raise InvalidInput(f"{where}: {exc}") from exc
    if not body.strip() or len(patchset) == 0:
        raise InvalidInput(f"{where}: contains no diff")
    out = dict(files)
    for pfile in patchset:
        src = _strip_prefix(pfile.source_file, where)
        dst = _strip_prefix(pfile.target_file, where)
        if dst is None or (src is not None and src != dst):
            raise InvalidInput(f"{where}: only modifying or creating files is supported ({pfile.path})")
        if src is None and dst in out:
            raise AuthoringError(f"{where}: creates {dst}, which already exists")
        if src is not None and src not in out:
            raise AuthoringError(f"{where}: modifies {src}, which is neither pinned nor created earlier")
        lines = split_lines(out[src]) if src is not None else []
        result: list[str] = []
        cursor = 0
        for hunk in pfile:
            start = hunk.source_start - 1 if hunk.source_length else hunk.source_start
            old_lines: list[str] = []
            new_lines: list[str] = []
            last_type = ""
            for line in hunk:
                if line.line_type == "\\":  # "\ No newline at end of file" ends the line before
                    if last_type in (" ", "-"):
                        old_lines[-1] = old_lines[-1].removesuffix("\n")
                    if last_type in (" ", "+"):
                        new_lines[-1] = new_lines[-1].removesuffix("\n")
                    continue
                last_type = line.line_type
                if line.line_type in (" ", "-"):
                    old_lines.append(line.value)
                if line.line_type in (" ", "+"):
                    new_lines.append(line.value)
            found = lines[start : start + len(old_lines)]
            if start < cursor or found != old_lines:
                raise AuthoringError(
                    f"{where}: {dst}: hunk @@ -{hunk.source_start},{hunk.source_length} @@ does "
                    f"not match at line {hunk.source_start}"
                )
            result += lines[cursor:start] + new_lines
            cursor = start + len(old_lines)
        result += lines[cursor:]
        out[dst] = "".join(result)
    return out


def created_paths(patch_text: str) -> list[str]:
    """Files a patch creates (``--- /dev/null``)."""
    import unidiff

    _, body = split_header(patch_text)
    return [pf.target_file[2:] for pf in unidiff.PatchSet(body) if pf.source_file == "/dev/null"]


# ----------------------------------------------------------------------------- the series


@dataclass
class Stack:
    """A series read for authoring: its patches in order and the states between them."""

    series_dir: Path
    names: list[str]
    texts: list[str]
    states: list[dict[str, str]]  # states[k] = files after the first k patches
    package_prefix: str | None
    pinned: list[str]


def read_patch(series_dir: Path, name: str) -> str:
    """Patch ``name`` of the series as text: its file, or the runtime patch its marker renders
    (``<name>.runtime``, patchkit/engine/runtime_patch.py), as the engine reads it."""
    return _decode(runtime_patch.patch_data(str(series_dir), name), str(Path(series_dir) / name))


def copy_patch(src_dir: Path, dst_dir: Path, name: str) -> None:
    """Copy patch ``name`` of one series folder into another as it is stored there: its marker
    (then the patch stays rendered from the runtime; a copy at ``dst_dir/name`` is removed) or
    its file."""
    marker = runtime_patch.marker_path(str(src_dir), name)
    if os.path.isfile(marker):
        shutil.copyfile(marker, runtime_patch.marker_path(str(dst_dir), name))
        (Path(dst_dir) / name).unlink(missing_ok=True)
    else:
        shutil.copyfile(Path(src_dir) / name, Path(dst_dir) / name)


def read_series_names(series_dir: Path) -> list[str]:
    series_file = Path(series_dir) / "series"
    if not series_file.is_file():
        return []
    names = []
    for raw in series_file.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            names.append(line.split()[0])
    return names


def load_pristine(series_dir: Path, pristine_tree: Path) -> tuple[dict[str, str], Pin]:
    """The pinned files read from ``pristine_tree`` (either layout), checked against the pin."""
    pin = read_pin(Path(series_dir) / "pin.toml")
    files: dict[str, str] = {}
    for entry in pin.files.values():
        data = locate_in_tree(Path(pristine_tree), entry.path, pin.package_prefix).read_bytes()
        if sha256_bytes(data) != entry.sha256:
            raise AuthoringError(
                f"{pristine_tree}: {entry.path} is not the pinned text "
                f"(sha256 {sha256_bytes(data)[:16]}..., pin {entry.sha256[:16]}...)"
            )
        files[entry.path] = _decode(data, entry.path)
    return files, pin


def load_stack(series_dir: Path, pristine_tree: Path) -> Stack:
    series_dir = Path(series_dir)
    files, pin = load_pristine(series_dir, pristine_tree)
    names = read_series_names(series_dir)
    texts, states = [], [files]
    for name in names:
        path = series_dir / name
        text = read_patch(series_dir, name)
        texts.append(text)
        states.append(apply_patch(states[-1], text, str(path)))
    return Stack(series_dir, names, texts, states, pin.package_prefix, list(pin.files))


def _read_edited(edited_tree: Path, paths: list[str], prefix: str | None) -> dict[str, str]:
    out = {}
    for path in paths:
        try:
            data = locate_in_tree(Path(edited_tree), path, prefix).read_bytes()
        except Refused:
            continue  # absent in the edited tree: treated as "not there"
        out[path] = _decode(data, f"{edited_tree}: {path}")
    return out


def diff_states(before: dict[str, str], after: dict[str, str], context: int = DEFAULT_CONTEXT) -> str:
    """The diff text turning ``before`` into ``after``; files in sorted path order."""
    chunks = []
    for path in sorted(set(before) | set(after)):
        if path not in after:
            raise AuthoringError(f"{path}: missing from the edited tree (deleting files is not supported)")
        if path not in before:
            chunks.append(new_file_patch(path, after[path]))
        elif before[path] != after[path]:
            chunks.append(file_diff(path, before[path], after[path], context))
    return "".join(chunks)


def _write_series(series_dir: Path, names: list[str]) -> None:
    series_file = Path(series_dir) / "series"
    if series_file.is_file():
        # Keep comments and blank lines; append names not yet listed.
        lines = series_file.read_text().splitlines(keepends=True)
        listed = read_series_names(series_dir)
        extra = [n for n in names if n not in listed]
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        series_file.write_text("".join(lines) + "".join(n + "\n" for n in extra))
    else:
        series_file.write_text("".join(n + "\n" for n in names))


def _check_name(name: str) -> None:
    if (
        not name
        or "/" in name
        or name.startswith(".")
        or name in ("series", "pin.toml")
        or any(ch.isspace() for ch in name)
        or "#" in name
        or name.endswith(runtime_patch.MARKER_SUFFIX)  # the name of a rendered patch's marker
    ):
        raise InvalidInput(f"patch name {name!r}: use a plain file name, e.g. 0008-my-timer.patch")


def new_patch(
    series_dir: Path,
    name: str,
    edited_tree: Path,
    pristine_tree: Path,
    *,
    header: str | None = None,
    new_files: Sequence[str] = (),
    context: int = DEFAULT_CONTEXT,
) -> Path:
    """Append patch ``name`` = diff(state after the whole series, edited tree).

    ``new_files``: paths (checkout layout, as in the patches) the new patch creates.
    """
    _check_name(name)
    stack = load_stack(series_dir, pristine_tree)
    if (
        name in stack.names
        or (Path(series_dir) / name).exists()
        or runtime_patch.is_rendered(str(series_dir), name)
    ):
        raise AuthoringError(f"{series_dir}: a patch named {name} already exists")
    top = stack.states[-1]
    edited = _read_edited(edited_tree, sorted(set(top) | set(new_files)), stack.package_prefix)
    for path in new_files:
        if path not in edited:
            raise AuthoringError(f"{edited_tree}: new file {path} is not there")
    diff = diff_states(top, edited, context)
    if not diff:
        raise AuthoringError(f"{edited_tree}: no change against the applied series; nothing to record")
    if header is None:
        header = f"{name}: describe what this patch times and why.\n\n"
    elif header and not header.endswith("\n"):
        header += "\n"
    text = header + diff
    apply_patch(top, text, name)  # the new patch must apply to the stack it was made on
    target = Path(series_dir) / name
    write_text(target, text)
    _write_series(series_dir, stack.names + [name])
    return target


def refresh(
    series_dir: Path,
    edited_tree: Path,
    pristine_tree: Path,
    *,
    patch: str | None = None,
    context: int = DEFAULT_CONTEXT,
) -> tuple[Path, bool]:
    """Rewrite one patch (the top one by default) from the edited tree; header kept.

    Returns (patch file, changed). Nothing is written when the bytes would not change. A runtime
    patch held as a marker (rendered from patchkit/timing) is only ever unchanged: a change to it
    is refused (edit patchkit/timing/phase_timer.py instead).
    """
    stack = load_stack(series_dir, pristine_tree)
    if not stack.names:
        raise AuthoringError(f"{series_dir}: the series has no patches to refresh")
    name = patch or stack.names[-1]
    if name not in stack.names:
        raise InvalidInput(f"{series_dir}: no patch {name} in the series")
    k = stack.names.index(name)
    before, old_after = stack.states[k], stack.states[k + 1]
    edited = _read_edited(edited_tree, sorted(old_after), stack.package_prefix)
    header, _ = split_header(stack.texts[k])
    text = header + diff_states(before, edited, context)
    if text == header:
        raise AuthoringError(f"{edited_tree}: {name} would become empty; remove it from series instead")
    state = apply_patch(before, text, name)
    for later, later_text in zip(stack.names[k + 1 :], stack.texts[k + 1 :]):
        try:
            state = apply_patch(state, later_text, later)
        except Refused as exc:
            raise AuthoringError(
                f"refresh of {name} would break {later}, which no longer applies: {exc}"
            ) from exc
    target = Path(series_dir) / name
    changed = text != stack.texts[k]
    if changed and runtime_patch.is_rendered(str(series_dir), name):
        raise AuthoringError(
            f"{series_dir}: {name} is rendered from patchkit/timing/{RUNTIME_FILE_NAME} "
            f"({name}{runtime_patch.MARKER_SUFFIX}); edit the runtime there instead"
        )
    if changed:
        write_text(target, text)
    return target, changed


def prepare_edit_tree(
    series_dir: Path, pristine_tree: Path, dest: Path, *, upto: str | None = None, layout: str = "checkout"
) -> Path:
    """Write the state after patches 1..upto (all by default) into ``dest`` for editing."""
    stack = load_stack(series_dir, pristine_tree)
    if upto is None:
        k = len(stack.names)
    elif upto in stack.names:
        k = stack.names.index(upto) + 1
    else:
        raise InvalidInput(f"{series_dir}: no patch {upto} in the series")
    for path, text in stack.states[k].items():
        rel = path if layout == "checkout" else installed_path(path, stack.package_prefix)
        target = Path(dest) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text(target, text)
    return Path(dest)


def regenerate_new_file_patch(
    series_dir: Path, patch_name: str, target_path: str, source: Path, *, write: bool = True
) -> tuple[str, bool]:
    """Rebuild a new-file patch (e.g. the timing runtime) from its source of truth.

    The existing header is kept. Returns (patch text, changed); writes only when changed.
    """
    patch_file = Path(series_dir) / patch_name
    old = read_text(patch_file) if patch_file.is_file() else None
    header = split_header(old)[0] if old is not None else ""
    text = header + new_file_patch(target_path, read_text(Path(source)))
    changed = old != text
    if write and changed:
        write_text(patch_file, text)
    return text, changed


def runtime_source() -> Path:
    """The timing runtime's source of truth, ``patchkit/timing/phase_timer.py``."""
    return PACKAGE / "timing" / RUNTIME_FILE_NAME


def regenerate_runtime_patches(
    series_dir: Path, source: Path | None = None, *, write: bool = True
) -> list[tuple[str, bool]]:
    """``patch.gen-runtime``: rebuild every patch of the series that creates a phase_timer.py.

    A patch held as a marker (``<patch>.runtime``, as in every shipped series) is rendered from
    patchkit/timing/phase_timer.py whenever it is read: there is nothing to rebuild, unless a
    copy of it lies beside the marker and differs (that copy is rewritten from the runtime).
    Returns [(patch name, changed)]; with ``write=False`` only reports (``--check``).
    """
    source = Path(source) if source is not None else runtime_source()
    results = []
    for name in read_series_names(series_dir):
        if runtime_patch.is_rendered(str(series_dir), name):
            copy = Path(series_dir) / name
            marker = runtime_patch.marker_path(str(series_dir), name)
            prefix = read_pin(Path(series_dir) / "pin.toml").package_prefix
            data = runtime_patch.render(runtime_patch.read_marker(marker), prefix)
            changed = copy.is_file() and copy.read_bytes() != data
            if write and changed:
                copy.write_bytes(data)
            results.append((name, changed))
            continue
        text = read_patch(series_dir, name)
        for path in created_paths(text):
            if path.rsplit("/", 1)[-1] == RUNTIME_FILE_NAME:
                if len(created_paths(text)) != 1:
                    raise InvalidInput(f"{name}: the runtime patch must create only {path}")
                _, changed = regenerate_new_file_patch(series_dir, name, path, source, write=write)
                results.append((name, changed))
    if not results:
        raise InvalidInput(f"{series_dir}: no patch creates a {RUNTIME_FILE_NAME}")
    return results


def export_series(series_dir: Path, out_root: Path) -> tuple[Path, int]:
    """``patch.export``: write the series folder as users get it into ``out_root/<its name>``:
    every file of the folder, each runtime patch rendered in place of its marker (the bytes the
    wheel ships and the engine reads). An existing non-empty destination is refused; the folder
    appears whole or not at all. Returns (the folder written, its number of files)."""
    from patchkit.engine.series import read_series

    series_dir = Path(series_dir).resolve()
    read_series(str(series_dir))  # a broken series is refused before anything is written
    files = runtime_patch.materialize(str(series_dir))
    dest = Path(out_root).resolve() / series_dir.name
    write_new_folder(dest, files, "patch.export")
    return dest, len(files)
