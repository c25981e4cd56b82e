"""The series users get, compared byte for byte with what a base commit gives them.

A refactoring must leave every series a user gets as it was. A user gets a series
folder as `patch.export` writes it (the same bytes the wheel ships and the engine reads); before
the runtime was stored once (commit c07b709, the default base), the folder in the checkout was
that folder. For every series of the base this prints whether each file of the exported folder
now is byte-identical to the base's, and, for the runtime patch, whether it is exactly the base's
runtime patch with only the runtime's own lines changed: the current rendering of the base's
`patchkit/timing/phase_timer.py` (the runtime itself has changed since, by design, in one file).

    python bench/series_bytes.py [--base COMMIT]

Exit 0 when every file is identical and every runtime patch is the rendering of its commit's
runtime; 1 otherwise (the differing files are listed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from patchkit.author.authoring import export_series  # noqa: E402
from patchkit.engine import runtime_patch  # noqa: E402
from patchkit.locations import series_root, shipped_names  # noqa: E402
from patchkit.pin import parse_pin, read_pin  # noqa: E402


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True).stdout


def base_files(base: str, name: str, base_runtime: str) -> dict[str, bytes]:
    """Every file of patches/NAME at the base commit: the folder a user got then. A base that
    already stored the runtime once holds a marker there; its user got the rendering of that
    commit's runtime (rendered here by today's runtime_patch.render, whose header and diff
    format that base shared)."""
    listing = git("ls-tree", "-r", "--name-only", base, f"patches/{name}/").decode().split("\n")
    files = {p.split("/", 2)[2]: git("show", f"{base}:{p}") for p in listing if p}
    for rel in [r for r in files if r.endswith(runtime_patch.MARKER_SUFFIX)]:
        lines = [ln.strip() for ln in files.pop(rel).decode().splitlines()]
        (path,) = [ln for ln in lines if ln and not ln.startswith("#")]
        prefix = parse_pin(files["pin.toml"].decode()).package_prefix
        files[rel.removesuffix(runtime_patch.MARKER_SUFFIX)] = runtime_patch.render(
            path, prefix, base_runtime
        )
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="c07b709", help="the commit before the redesign (default c07b709)")
    args = ap.parse_args()
    base_runtime = git("show", f"{args.base}:patchkit/timing/phase_timer.py").decode("utf-8")
    now_runtime = runtime_patch.runtime_text()
    base_names = sorted(
        {p.split("/")[1] for p in git("ls-tree", "-r", "--name-only", args.base, "patches/").decode().split()}
    )
    now_names = shipped_names()
    bad: list[str] = []
    files = same = rendered = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in base_names:
            if name not in now_names:
                bad.append(f"{name}: shipped at {args.base}, not now")
                continue
            out, _count = export_series(series_root() / name, Path(tmp))
            then = base_files(args.base, name, base_runtime)
            now = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
            if sorted(then) != sorted(now):
                bad.append(f"{name}: files {sorted(set(then) ^ set(now))} only on one side")
            for rel in sorted(set(then) & set(now)):
                files += 1
                if then[rel] == now[rel]:
                    same += 1
                    continue
                if rel == runtime_patch.RUNTIME_PATCH:
                    path = runtime_patch.read_marker(
                        str(series_root() / name / (rel + runtime_patch.MARKER_SUFFIX))
                    )
                    prefix = read_pin(series_root() / name / "pin.toml").package_prefix
                    if (
                        runtime_patch.render(path, prefix, base_runtime) == then[rel]
                        and runtime_patch.render(path, prefix, now_runtime) == now[rel]
                    ):
                        rendered += 1  # the rendering of each commit's runtime: only the runtime changed
                        continue
                bad.append(f"{name}/{rel}: differs")
    runtime_changed = base_runtime != now_runtime
    print(f"base {args.base}: {len(base_names)} series; now {len(now_names)} shipped")
    print(f"{files} files compared: {same} byte-identical, {rendered} runtime patches")
    print(
        "  that are the base's patch with only the runtime's lines changed"
        + (" (the runtime changed since the base)" if runtime_changed else "")
    )
    for line in bad:
        print("DIFFERS:", line)
    print("verdict:", "identical but for the runtime" if not bad else f"{len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
