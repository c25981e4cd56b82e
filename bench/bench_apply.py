"""Apply + revert a series of several hundred real diffs, side by side with quilt and git apply.

The diffs are real: every .py file that changed between the sglang 0.5.9 and 0.5.10 wheels
(fetched by pinned version and sha256), one patch per file. Each tool applies the same patches to
its own copy of the 0.5.9 tree and reverts them; the script prints medians and the two ratios the
engine issue sets as goals: patchkit <= 0.25x quilt, patchkit <= 5x git apply.

    python bench/bench_apply.py [--runs 3] [--limit N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit import ops, upstream  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def sglang_py_files(version: str) -> dict[str, bytes]:
    wheel = upstream.fetch_wheel("sglang", version, wheelhouse=os.environ.get("PATCHKIT_WHEELHOUSE"))
    with zipfile.ZipFile(wheel.path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.startswith("sglang/") and n.endswith(".py")}


def build_series(work: Path, limit: int | None) -> tuple[Path, dict[str, bytes], int]:
    old, new = sglang_py_files("0.5.9"), sglang_py_files("0.5.10")
    changed = sorted(p for p in old if p in new and old[p] != new[p])[:limit]
    repo = work / "diffrepo"
    repo.mkdir()
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(work))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=b@b", "-c", "core.autocrlf=false"]
    for p in changed:
        (repo / p).parent.mkdir(parents=True, exist_ok=True)
        (repo / p).write_bytes(old[p])
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True, env=env)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(git + ["commit", "-qm", "0.5.9"], cwd=repo, check=True, env=env)
    series = work / "series"
    series.mkdir()
    names, hunks = [], 0
    for i, p in enumerate(changed, 1):
        (repo / p).write_bytes(new[p])
        diff = subprocess.run(git + ["diff", "--", p], cwd=repo, check=True, env=env,
                              capture_output=True).stdout
        name = f"{i:04d}-{p.replace('/', '_')[:60]}.patch"
        (series / name).write_bytes(diff)
        names.append(name)
        hunks += diff.count(b"\n@@ ")
    (series / "series").write_text("".join(n + "\n" for n in names))
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True, env=env)
    upstream.pin_from_tree(repo, changed, "sglang", version="0.5.9", pin_path=series / "pin.toml")
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True, env=env)
    return series, {p: old[p] for p in changed}, hunks


def fresh_tree(path: Path, files: dict[str, bytes]) -> None:
    shutil.rmtree(path, ignore_errors=True)
    for p, data in files.items():
        (path / p).parent.mkdir(parents=True, exist_ok=True)
        (path / p).write_bytes(data)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(cmd, cwd, env=None):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, env=env)
    if proc.returncode:
        raise SystemExit(f"{cmd[:3]} failed: {proc.stderr.decode()[-500:]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="use only the first N changed files")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pk-bench-"))
    try:
        series, files, hunks = build_series(work, args.limit)
        patches = [series / n for n in (series / "series").read_text().split()]
        print(f"series: {len(patches)} real diffs (sglang 0.5.9 -> 0.5.10), {len(files)} files, "
              f"{hunks} hunks")
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(work), QUILT_PATCHES=str(series))
        results: dict[str, list[float]] = {k: [] for k in (
            "patchkit apply", "patchkit revert", "patchkit CLI apply", "patchkit CLI revert",
            "quilt push -a", "quilt pop -a", "git apply", "git apply -R")}
        tree = work / "tree"
        for _ in range(args.runs):
            fresh_tree(tree, files)
            results["patchkit apply"].append(timed(lambda: _ok(ops.apply(str(series), [str(tree)]))))
            results["patchkit revert"].append(timed(lambda: _ok(ops.revert(str(series), [str(tree)]))))
            cli = [sys.executable, "-m", "invoke", "patch.apply", "--series", str(series), "--target", str(tree)]
            results["patchkit CLI apply"].append(timed(lambda: run(cli, REPO)))
            cli[3] = "patch.revert"
            results["patchkit CLI revert"].append(timed(lambda: run(cli, REPO)))
            fresh_tree(tree, files)
            results["quilt push -a"].append(timed(lambda: run(["quilt", "push", "-a", "-q"], tree, env)))
            results["quilt pop -a"].append(timed(lambda: run(["quilt", "pop", "-a", "-q"], tree, env)))
            shutil.rmtree(tree / ".pc", ignore_errors=True)
            fresh_tree(tree, files)
            results["git apply"].append(timed(lambda: run(["git", "apply", *map(str, patches)], tree, env)))
            results["git apply -R"].append(timed(lambda: run(["git", "apply", "-R", *map(str, reversed(patches))], tree, env)))
        med = {k: statistics.median(v) for k, v in results.items()}
        for k, v in med.items():
            print(f"  {k:22s} {v:8.3f} s (median of {args.runs})")
        pk = med["patchkit apply"] + med["patchkit revert"]
        pk_cli = med["patchkit CLI apply"] + med["patchkit CLI revert"]
        quilt = med["quilt push -a"] + med["quilt pop -a"]
        git = med["git apply"] + med["git apply -R"]
        print(f"apply+revert: patchkit {pk:.3f} s (CLI, start-up included: {pk_cli:.3f} s), "
              f"quilt {quilt:.3f} s, git apply {git:.3f} s")
        print(f"ratio patchkit/quilt     = {pk / quilt:.3f}  (goal <= 0.25; CLI {pk_cli / quilt:.3f})")
        print(f"ratio patchkit/git apply = {pk / git:.2f}   (goal <= 5; CLI {pk_cli / git:.2f})")
        print(f"apply only: patchkit/quilt = {med['patchkit apply'] / med['quilt push -a']:.3f}, "
              f"patchkit/git = {med['patchkit apply'] / med['git apply']:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _ok(result):
    if result.exit_code:
        raise SystemExit(f"patchkit {result.op} failed: {result.to_json()}")


if __name__ == "__main__":
    main()
