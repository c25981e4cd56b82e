"""Import mode's hook folder: the series' plan as data, the stdlib hook, a sitecustomize.

    from patchkit.engine.importmode import write_hook
    hook = write_hook("patches/transformers-v5.17.0", "/srv/site", "/tmp/pk-hook")
    env["PYTHONPATH"] = hook.pythonpath

The plan is the sed engine's (patchkit/engine/plan.py), flattened into ``hook.json``; the hook
(patchkit/timing/import_hook.py, copied as ``_patchkit_import_hook.py``) applies it in memory
as Python imports the pinned modules. Before anything is written the target's files are read
(never written) and patched in memory here with the same code the hook runs: a target that is
not the pinned text is refused (exit 1) with no folder made. The folder holds:

- ``hook.json``: target root, series name and digest, per file the pin, expected lines, result;
- ``created/<module path>``: each file the series creates (the timing runtime);
- ``series/``: the series as users get it (patch.export's files), for the record;
- ``_patchkit_import_hook.py`` and ``sitecustomize.py`` (which chains to the one it shadows).

Deleting the folder (or starting without its PYTHONPATH) is the revert.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from patchkit.engine.plan import FilePlan, plan_series
from patchkit.engine.runtime_patch import materialize
from patchkit.engine.series import Series, load_series
from patchkit.errors import InvalidInput, Refused
from patchkit.paths import strip_prefix
from patchkit.timing import import_hook

HOOK_MODULE = "_patchkit_import_hook"
MODES = ("sed", "import")

SITECUSTOMIZE = '''\
"""Written by patchkit (import mode): applies {series} in memory as Python imports it.
Nothing in the target is changed; start without this folder on PYTHONPATH to undo."""

import os as _os
import sys as _sys

_here = _os.path.dirname(_os.path.abspath(__file__))
import {module} as _hook  # noqa: E402

_hook.install(_here)


def _chain() -> None:
    """Run the sitecustomize this one shadows (the next on sys.path), as Python would have."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
'''


@dataclass
class HookFolder:
    path: Path
    series: str
    root: str
    files: list[str]  # the target files patched in memory (target-relative)
    created: list[str]  # the module paths the series creates

    @property
    def pythonpath(self) -> str:
        return str(self.path)

    def as_dict(self) -> dict:
        return {
            "mode": "import",
            "hook": str(self.path),
            "pythonpath": self.pythonpath,
            "series": self.series,
            "target": self.root,
            "patched_in_memory": self.files,
            "created": self.created,
            "written_in_target": [],
        }


def _text(data: bytes) -> str:
    return data.decode("latin-1")  # the hook reads it back with encode("latin-1"): any byte


def _result_steps(plan: FilePlan) -> list[list]:
    steps: list[list] = []
    for it in plan.final:
        n = it if type(it) is int else (None if it.orig is None or it.phantom else it.orig)
        if n is not None:
            if steps and steps[-1][0] == "keep" and steps[-1][2] == n - 1:
                steps[-1][2] = n
            else:
                steps.append(["keep", n, n])
        elif it.phantom:
            steps.append(["tail"])
        else:
            steps.append(["new", _text(it.text), it.eol])
    return steps


def _expected(plan: FilePlan) -> list[list]:
    hunk_of: dict[int, str] = {}
    for ref in plan.hunk_refs:
        for n, _ in ref.lines:
            hunk_of.setdefault(n, f"{ref.patch} hunk {ref.number} ({ref.header.strip()})")
    return [[n, _text(t), e, hunk_of.get(n, "")] for n, t, e in plan.expected_pre_lines()]


def _created_text(plan: FilePlan) -> bytes:
    return b"".join(it.text + (b"\n" if it.eol else b"") for it in plan.final)


def target_path(series: Series, path: str, root: str, layout: str) -> str:
    """The file's path below ``root`` in the target's layout (auto: where the first pinned file is)."""
    prefix = series.pin.package_prefix
    if layout == "auto":
        first = next(iter(series.pin.files))
        layout = "checkout" if os.path.isfile(os.path.join(root, first)) else "installed"
    return path if layout == "checkout" else strip_prefix(path, prefix)


def hook_data(series: Series, root: str, layout: str = "auto") -> tuple[dict, dict[str, bytes]]:
    """(hook.json's document, {module path: bytes} of the files the series creates)."""
    files: list[dict] = []
    created: dict[str, bytes] = {}
    for plan in plan_series(series):
        module_path = strip_prefix(plan.path, series.pin.package_prefix)
        if plan.kind == "create":
            created[module_path] = _created_text(plan)
            path = target_path(series, plan.path, root, layout)
            files.append({"kind": "create", "path": path, "module_path": module_path})
        elif plan.kind == "delete":
            raise InvalidInput(f"{plan.path}: import mode cannot delete a file (the series deletes it)")
        else:
            if not module_path.endswith(".py"):
                raise InvalidInput(f"{plan.path}: import mode patches Python modules only")
            assert plan.pinned is not None
            files.append(
                {
                    "kind": "modify",
                    "path": target_path(series, plan.path, root, layout),
                    "module_path": module_path,
                    "sha256": plan.pinned.sha256,
                    "lines": plan.pinned.lines,
                    "expected": _expected(plan),
                    "result": _result_steps(plan),
                }
            )
    doc = {
        "format": import_hook.FORMAT,
        "series": series.name,
        "digest": series.digest,
        "root": os.path.abspath(root),
        "files": files,
    }
    return doc, created


def patched_texts(series_dir: str, root: str, layout: str = "auto") -> dict[str, bytes]:
    """{target-relative path: the bytes import mode runs} for every file the series modifies;
    reads the target, writes nothing; Refused when a file is not its pinned text."""
    doc, _ = hook_data(load_series(series_dir), root, layout)
    return _patch_all(doc)


def _patch_all(doc: dict) -> dict[str, bytes]:
    """What the hook will do with hook.json's ``doc``, done here first: every modified file read,
    checked and patched (the hook's own routine), its failure in the contract's terms."""
    out = {}
    for entry in doc["files"]:
        if entry["kind"] != "modify":
            continue
        try:
            out[entry["path"]] = import_hook.read_patched(doc["root"], entry)[1]
        except import_hook.HunkMismatch as exc:
            raise InvalidInput(
                f"this series is inconsistent: {exc} (the file has the pinned sha256)"
            ) from None
        except import_hook.ImportRefused as exc:
            raise Refused(str(exc)) from None
    return out


def write_hook(
    series_dir: str, root: str, dest: str | Path | None = None, layout: str = "auto"
) -> HookFolder:
    """Check the target (read only) and write the hook folder at ``dest`` (a fresh temporary
    folder when None; an existing ``dest`` must be empty). Nothing is written under ``root``."""
    if not os.path.isdir(root):
        raise InvalidInput(
            f"--mode import: {root}: not a local directory (import mode runs where the server runs)"
        )
    series = load_series(series_dir)
    doc, created = hook_data(series, root, layout)
    _patch_all(doc)  # every file checked and patched before anything is written
    root_abs = Path(os.path.realpath(root))
    if dest is None:
        dest = tempfile.mkdtemp(prefix="patchkit-import-")
    dest = Path(dest).absolute()
    real = Path(os.path.realpath(dest))
    if real == root_abs or root_abs in real.parents:
        raise InvalidInput(f"--mode import: the hook folder {dest} lies inside the target {root}")
    if dest.exists() and any(dest.iterdir()):
        raise InvalidInput(f"--mode import: {dest} is not empty")
    staging = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        (staging / import_hook.HOOK_FILE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        for module_path, data in created.items():
            out = staging / "created" / module_path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        (staging / "series").mkdir()
        for name, data in materialize(series.directory).items():
            (staging / "series" / name).write_bytes(data)
        shutil.copyfile(import_hook.__file__, staging / f"{HOOK_MODULE}.py")
        (staging / "sitecustomize.py").write_text(
            SITECUSTOMIZE.format(series=series.name, module=HOOK_MODULE), encoding="utf-8"
        )
        if dest.exists():
            dest.rmdir()
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return HookFolder(
        dest,
        series.name,
        doc["root"],
        [e["path"] for e in doc["files"] if e["kind"] == "modify"],
        sorted(created),
    )


def import_env(hook: HookFolder, env: dict | None = None) -> dict:
    """``env`` (default: this process's) with the hook folder first on PYTHONPATH and no
    bytecode written (PYTHONDONTWRITEBYTECODE: the other modules of the target stay unwritten too)."""
    env = dict(os.environ if env is None else env)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([hook.pythonpath] + ([rest] if rest else []))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
