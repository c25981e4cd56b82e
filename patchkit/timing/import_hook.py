"""Import mode: a pinned series applied in memory, as Python imports the pinned modules.

Standard library only and self-contained: patchkit copies this file into a hook folder of its
own (patchkit/engine/importmode.py writes it), beside ``hook.json`` (the series' plan as data)
and a ``sitecustomize.py`` that calls ``install``. The server gets that folder first on its
PYTHONPATH; nothing is written in the target package.

``hook.json`` holds, for every file the series modifies, the engine's plan
(patchkit/engine/plan.py) flattened: the original lines each hunk expects at their numbers,
and the result as runs of kept original lines and new lines. Applying it is a splice, with no
search, fuzz or offset: the text is the one the sed engine writes, byte for byte. Files the
series creates (the timing runtime) are served from the hook folder's copy.

Refusal, never half. ``install`` checks everything before any pinned module can load: each
original's sha256 and line count against the pin, every expected line, no pinned module
already imported, no created module already present in the target. Any failure ends the
process (exit status ``REFUSED_EXIT``) with one ``patchkit import mode: refused`` line on
stderr: the server does not start, patched or not. An import that would load a pinned module
from another file than the one checked raises ``ImportRefused`` (not an ImportError, so no
``except ImportError`` fallback runs the unpatched code).

The loader compiles the patched text under the original filename, registers that text with
``linecache`` (tracebacks and ``inspect.getsource`` show the patched lines; ``install`` sets a
``sys.excepthook`` that prints through the traceback module, where Python's own would read the
file on disk) and caches no bytecode (``cached`` is None; nothing is written).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import linecache
import os
import sys

HOOK_FILE = "hook.json"
FORMAT = 1
REFUSED_EXIT = 3
PREFIX = "patchkit import mode"


class ImportRefused(RuntimeError):
    """The series cannot be applied in memory; the message says which file and why."""


class HunkMismatch(ImportRefused):
    """The file is the pinned text, yet a hunk's line is not there: the series does not fit its
    own pin (a broken series, not a drifted target)."""


def _line_bytes(text: str) -> bytes:
    return text.encode("latin-1")  # hook.json spells bytes as latin-1 text (one char per byte)


def split_original(data: bytes) -> tuple[list[bytes], bytes]:
    """(newline-terminated lines without their "\\n", the unterminated tail or b"")."""
    parts = data.split(b"\n")
    return parts[:-1], parts[-1]


def apply_file_plan(data: bytes, plan: dict, where: str) -> bytes:
    """The patched bytes of one pinned file: ``data`` checked against the pin and the hunks'
    expected lines, then spliced as the plan says. ``where``: the file, for messages."""
    digest = hashlib.sha256(data).hexdigest()
    lines, tail = split_original(data)
    if digest != plan["sha256"] or len(lines) != plan["lines"]:
        raise ImportRefused(
            f"{where}: not the pinned text (sha256 {digest[:12]}…, {len(lines)} lines; the pin says "
            f"{plan['sha256'][:12]}…, {plan['lines']} lines)"
        )

    def original(n: int) -> bytes:
        if 1 <= n <= len(lines):
            return lines[n - 1] + b"\n"
        if n == len(lines) + 1 and tail:
            return tail
        raise ImportRefused(f"{where}: line {n} does not exist ({len(lines)} lines)")

    for n, text, eol, hunk in plan["expected"]:
        want = _line_bytes(text) + (b"\n" if eol else b"")
        found = original(n)
        if found != want:
            raise HunkMismatch(f"{where}: {hunk}: line {n}: expected {want!r}, found {found!r}")
    out: list[bytes] = []
    for step in plan["result"]:
        if step[0] == "keep":  # original lines first..last
            out.extend(original(n) for n in range(step[1], step[2] + 1))
        elif step[0] == "new":
            out.append(_line_bytes(step[1]) + (b"\n" if step[2] else b""))
        elif step[0] == "tail":  # the possible unterminated last line no hunk named
            out.append(tail)
        else:
            raise ImportRefused(f"{where}: unknown plan step {step[0]!r} (hook.json damaged?)")
    return b"".join(out)


def read_patched(root: str, entry: dict) -> tuple[str, bytes]:
    """(the file's path, its patched bytes) for one modified file of hook.json below ``root``."""
    filename = os.path.join(root, entry["path"])
    try:
        with open(filename, "rb") as fh:
            original = fh.read()
    except OSError as exc:
        raise ImportRefused(f"{filename}: cannot be read ({exc.strerror})") from None
    return filename, apply_file_plan(original, entry, filename)


class PatchedLoader(importlib.abc.Loader):
    """Runs a module from text held in memory, compiled under ``filename``; caches nothing."""

    def __init__(self, fullname: str, filename: str, source: bytes) -> None:
        self.fullname, self.filename, self.source = fullname, filename, source

    def create_module(self, spec):
        return None

    def get_source(self, fullname: str) -> str:
        return importlib.util.decode_source(self.source)

    def get_filename(self, fullname: str) -> str:
        return self.filename

    def exec_module(self, module) -> None:
        text = self.get_source(self.fullname)
        linecache.cache[self.filename] = (len(text), None, text.splitlines(True), self.filename)
        code = compile(text, self.filename, "exec", dont_inherit=True)
        exec(code, module.__dict__)


class PatchedFinder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: serves the pinned and created modules of one series."""

    def __init__(self, modules: dict[str, tuple[str, bytes, bool]], created: set[str]) -> None:
        self.modules = modules  # fullname -> (filename, patched source, is a package)
        self.created = created  # the fullnames the series creates

    def find_spec(self, fullname, path=None, target=None):
        entry = self.modules.get(fullname)
        if entry is None:
            return None
        filename, source, package = entry
        found = importlib.machinery.PathFinder.find_spec(fullname, path)
        if fullname in self.created:
            if found is not None and found.origin:
                raise ImportRefused(f"{fullname}: the series creates it, but {found.origin} exists")
        elif found is None or not found.origin or not _same_file(found.origin, filename):
            got = found.origin if found is not None else "nowhere"
            raise ImportRefused(f"{fullname} would load from {got}, not from the checked {filename}")
        loader = PatchedLoader(fullname, filename, source)
        spec = importlib.util.spec_from_file_location(
            fullname,
            filename,
            loader=loader,
            submodule_search_locations=[os.path.dirname(filename)] if package else None,
        )
        assert spec is not None
        spec.cached = None
        return spec


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def module_name(path: str) -> tuple[str, bool]:
    """(module name, is a package) of a path below a sys.path entry."""
    stem = path[: -len(".py")] if path.endswith(".py") else path
    parts = stem.split("/")
    package = parts[-1] == "__init__"
    if package:
        parts.pop()
    return ".".join(parts), package


def prepare(hook_dir: str) -> PatchedFinder:
    """Read hook.json, check and patch every file; raises ImportRefused."""
    with open(os.path.join(hook_dir, HOOK_FILE), encoding="utf-8") as fh:
        data = json.load(fh)
    if data.get("format") != FORMAT:
        raise ImportRefused(
            f"{hook_dir}/{HOOK_FILE}: format {data.get('format')!r}, this hook reads {FORMAT}"
        )
    modules: dict[str, tuple[str, bytes, bool]] = {}
    created = set()
    for entry in data["files"]:
        name, package = module_name(entry["module_path"])
        if entry["kind"] == "create":
            present = os.path.join(data["root"], entry["path"])
            if os.path.lexists(present):
                raise ImportRefused(f"{present}: the series creates it, but it exists (applied with sed?)")
            filename = os.path.join(hook_dir, "created", entry["module_path"])
            with open(filename, "rb") as fh:
                source = fh.read()
            created.add(name)
        else:
            filename, source = read_patched(data["root"], entry)
        modules[name] = (filename, source, package)
    early = sorted(n for n in modules if n in sys.modules)
    if early:
        raise ImportRefused(f"already imported before the hook ran: {', '.join(early)}")
    return PatchedFinder(modules, created)


def print_exception(kind, value, tb) -> None:
    """sys.excepthook: Python's own reads source lines from the file on disk, not from
    linecache; this one (the traceback module's) shows the patched lines."""
    import traceback

    traceback.print_exception(kind, value, tb, file=sys.stderr)


def install(hook_dir: str) -> PatchedFinder:
    """Check and patch the series of ``hook_dir`` and put its finder first on sys.meta_path;
    on any refusal, end the process (REFUSED_EXIT) with one line on stderr."""
    try:
        finder = prepare(hook_dir)
    except (ImportRefused, OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"{PREFIX}: refused, the process does not start: {exc}\n")
        sys.stderr.flush()
        os._exit(REFUSED_EXIT)  # site.py would print a sitecustomize error and go on unpatched
    sys.meta_path.insert(0, finder)
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = print_exception
    if os.environ.get("PATCHKIT_IMPORT_QUIET") != "1":
        sys.stderr.write(f"{PREFIX}: {len(finder.modules)} modules patched in memory ({hook_dir})\n")
    return finder
