"""pin.toml: the one pin model, its reader (which validates) and its writer.

A series' ``pin.toml`` names the upstream release and the exact text of every file the series
patches (sha256 and ``wc -l`` lines). The engine checks targets against it, authoring writes it
(``upstream.pin``, ``patch.rebase``, seriesgen); both use this model. ``files`` maps each
path to its entry in pin.toml order; ``also_versions`` are releases shipping those files byte
for byte. ``format_pin`` writes the DESIGN.md format in a stable order, so that
``parse_pin(format_pin(pin)) == pin`` and rewriting an unchanged pin is byte-identical.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import InvalidInput
from patchkit.paths import path_problem

_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class PinnedFile:
    path: str
    sha256: str
    lines: int


@dataclass
class Pin:
    name: str
    version: str | None = None
    commit: str | None = None
    package_prefix: str | None = None
    files: dict[str, PinnedFile] = field(default_factory=dict)
    # Other releases that ship these pinned files byte for byte (e.g. a .postN): the installed
    # layout's dist-info version may be any of version + also_versions.
    also_versions: tuple[str, ...] = ()

    def __post_init__(self):
        # a list of PinnedFile (in pin.toml order) is accepted and kept as {path: entry}
        if not isinstance(self.files, dict):
            self.files = {entry.path: entry for entry in self.files}
        self.also_versions = tuple(self.also_versions)

    @property
    def versions(self) -> tuple[str, ...]:
        return ((self.version,) if self.version else ()) + self.also_versions


def parse_pin(text: str, where: str = "pin.toml") -> Pin:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"{where}: not valid TOML: {e}") from e
    up = data.get("upstream")
    if not isinstance(up, dict):
        raise InvalidInput(f"{where}: missing [upstream] table")
    unknown = set(data) - {"upstream", "file"}
    if unknown:
        raise InvalidInput(f"{where}: unknown top-level keys {sorted(unknown)}")
    name = up.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}: [upstream] name must be a non-empty string")
    version = up.get("version")
    if version is not None and (not isinstance(version, str) or not version.strip()):
        raise InvalidInput(f"{where}: [upstream] version must be a non-empty string")
    also = up.get("also_versions", [])
    if not isinstance(also, list) or not all(
        isinstance(v, str) and v.strip() and not any(ch.isspace() for ch in v) for v in also
    ):
        raise InvalidInput(f"{where}: [upstream] also_versions must be a list of version strings")
    if also and version is None:
        raise InvalidInput(f"{where}: [upstream] also_versions needs a version")
    commit = up.get("commit")
    if commit is not None and (not isinstance(commit, str) or not _HEX40.match(commit)):
        raise InvalidInput(f"{where}: [upstream] commit must be 40 lowercase hex digits, got {commit!r}")
    prefix = up.get("package_prefix")
    if prefix is not None and (
        not isinstance(prefix, str) or not prefix.endswith("/") or path_problem(prefix[:-1])
    ):
        raise InvalidInput(f"{where}: package_prefix must be a relative path ending in '/', got {prefix!r}")
    files: dict[str, PinnedFile] = {}
    entries = data.get("file", [])
    if not isinstance(entries, list):
        raise InvalidInput(f"{where}: [[file]] must be an array of tables")
    for i, entry in enumerate(entries, 1):
        label = f"{where}: [[file]] #{i}"
        if not isinstance(entry, dict):
            raise InvalidInput(f"{label}: not a table")
        path, sha, lines = entry.get("path"), entry.get("sha256"), entry.get("lines")
        if not isinstance(path, str):
            raise InvalidInput(f"{label}: path missing")
        problem = path_problem(path)
        if problem:
            raise InvalidInput(f"{label}: unsafe path {path!r}: {problem}")
        if not isinstance(sha, str) or not _HEX64.match(sha):
            raise InvalidInput(f"{label} ({path}): sha256 must be 64 lowercase hex digits")
        if not isinstance(lines, int) or isinstance(lines, bool) or lines < 0:
            raise InvalidInput(f"{label} ({path}): lines must be a non-negative integer (wc -l)")
        if path in files:
            raise InvalidInput(f"{label}: {path} is pinned twice")
        files[path] = PinnedFile(path, sha, lines)
    return Pin(
        name=name,
        version=version,
        commit=commit,
        package_prefix=prefix,
        files=files,
        also_versions=tuple(also),
    )


def read_pin(pin_path) -> Pin:
    """The pin in a pin.toml file, validated (InvalidInput names the file and the problem)."""
    try:
        text = Path(pin_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{pin_path}: {exc}") from exc
    return parse_pin(text, str(pin_path))


def _toml_str(value: str) -> str:
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise InvalidInput(f"pin.toml: control character in {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_pin(pin: Pin) -> str:
    """pin.toml text in the DESIGN.md format (stable order, so rewrites are byte-identical)."""
    out = ["[upstream]", f"name = {_toml_str(pin.name)}"]
    if pin.version is not None:
        out.append(f"version = {_toml_str(pin.version)}")
    if pin.also_versions:
        out.append(f"also_versions = [{', '.join(_toml_str(v) for v in pin.also_versions)}]")
    if pin.commit is not None:
        out.append(f"commit = {_toml_str(pin.commit)}")
    if pin.package_prefix is not None:
        out.append(f"package_prefix = {_toml_str(pin.package_prefix)}")
    for entry in pin.files.values():
        out += [
            "",
            "[[file]]",
            f"path = {_toml_str(entry.path)}",
            f"sha256 = {_toml_str(entry.sha256)}",
            f"lines = {entry.lines}",
        ]
    return "\n".join(out) + "\n"


def write_pin(pin_path, pin: Pin) -> None:
    """Write ``pin`` to ``pin_path`` (its folder is made), in ``format_pin``'s format."""
    Path(pin_path).parent.mkdir(parents=True, exist_ok=True)
    Path(pin_path).write_text(format_pin(pin), encoding="utf-8")
