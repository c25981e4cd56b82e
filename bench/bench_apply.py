"""Apply + revert a series of several hundred real diffs, side by side with quilt and git apply.

The diffs are real: every .py file that changed between the sglang 0.5.9 and 0.5.10 wheels
(fetched by pinned version and sha256), one patch per file. Each tool applies the same patches to
its own copy of the 0.5.9 tree and reverts them; the script prints medians and the ratios the
engine issue sets as goals (patchkit apply <= 0.25x `quilt push -a` and <= 5x `git apply`), for
apply alone and for apply+revert.

patchkit runs twice over: "cold" is the very first apply of the series (its compile cache, in a
fresh PATCHKIT_CACHE, is empty: parse + plan included), "warm" every later one (the compiled
series is read back from the cache). CPU seconds (this process; the target program and its
tools) are printed beside the wall clock, which a shared machine makes noisy.

    python bench/bench_apply.py [--runs 3] [--limit N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit import ops
from patchkit.author import upstream

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
        diff = subprocess.run(
            git + ["diff", "--", p], cwd=repo, check=True, env=env, capture_output=True
        ).stdout
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


class CPU:
    """CPU seconds of this process and of its (waited-for) children while a block runs."""

    def __enter__(self):
        self.s, self.c = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return self

    def __exit__(self, *exc):
        s, c = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        self.own = s.ru_utime + s.ru_stime - self.s.ru_utime - self.s.ru_stime
        self.children = c.ru_utime + c.ru_stime - self.c.ru_utime - self.c.ru_stime


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
        series, files, hunks = build_series(work, args.limit)  # wheels from the usual cache
        os.environ["PATCHKIT_CACHE"] = str(work / "cache")  # cold first apply: nothing compiled yet
        patches = [series / n for n in (series / "series").read_text().split()]
        print(
            f"series: {len(patches)} real diffs (sglang 0.5.9 -> 0.5.10), {len(files)} files, "
            f"{len({os.path.dirname(p) for p in files})} directories, {hunks} hunks"
        )
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(work), QUILT_PATCHES=str(series))
        results: dict[str, list[float]] = {
            k: []
            for k in (
                "patchkit apply",
                "patchkit revert",
                "patchkit CLI apply",
                "patchkit CLI revert",
                "quilt push -a",
                "quilt pop -a",
                "git apply",
                "git apply -R",
            )
        }
        cpu: dict[str, list[float]] = {k: [] for k in results}  # CPU s: own + children
        tree = work / "tree"
        fresh_tree(tree, files)

        def measure(name, fn):
            with CPU() as c:
                results[name].append(timed(fn))
            cpu[name].append(c.own + c.children)
            return c

        with CPU() as cold_cpu:
            cold = timed(lambda: _ok(ops.apply(str(series), [str(tree)])))
        with CPU() as cold_revert_cpu:
            cold_revert = timed(lambda: _ok(ops.revert(str(series), [str(tree)])))
        own: dict[str, list[float]] = {"patchkit apply": [], "patchkit revert": []}
        for _ in range(args.runs):
            fresh_tree(tree, files)
            for op, fn in (("apply", ops.apply), ("revert", ops.revert)):
                c = measure(f"patchkit {op}", lambda fn=fn: _ok(fn(str(series), [str(tree)])))
                own[f"patchkit {op}"].append(c.own)
            cli = [
                sys.executable,
                "-m",
                "invoke",
                "patch.apply",
                "--series",
                str(series),
                "--target",
                str(tree),
            ]
            measure("patchkit CLI apply", lambda cli=cli: run(cli, REPO))
            cli[3] = "patch.revert"
            measure("patchkit CLI revert", lambda cli=cli: run(cli, REPO))
            fresh_tree(tree, files)
            measure("quilt push -a", lambda: run(["quilt", "push", "-a", "-q"], tree, env))
            measure("quilt pop -a", lambda: run(["quilt", "pop", "-a", "-q"], tree, env))
            shutil.rmtree(tree / ".pc", ignore_errors=True)
            fresh_tree(tree, files)
            measure("git apply", lambda: run(["git", "apply", *map(str, patches)], tree, env))
            measure(
                "git apply -R", lambda: run(["git", "apply", "-R", *map(str, reversed(patches))], tree, env)
            )
        med = {k: statistics.median(v) for k, v in results.items()}
        mcpu = {k: statistics.median(v) for k, v in cpu.items()}
        mcpu["cold apply"] = cold_cpu.own + cold_cpu.children
        mcpu["cold revert"] = cold_revert_cpu.own + cold_revert_cpu.children
        print(
            f"  {'patchkit apply, cold':22s} {cold:8.3f} s   CPU {mcpu['cold apply']:6.3f} s "
            f"(python {cold_cpu.own:.2f}, target {cold_cpu.children:.2f}; first apply: parse + plan)"
        )
        print(f"  {'patchkit revert, cold':22s} {cold_revert:8.3f} s   CPU {mcpu['cold revert']:6.3f} s")
        for k, v in med.items():
            extra = ""
            if k in own:
                o = statistics.median(own[k])
                extra = f" (python {o:.2f}, target {mcpu[k] - o:.2f}; warm)"
            print(f"  {k:22s} {v:8.3f} s   CPU {mcpu[k]:6.3f} s{extra}   median of {args.runs}")
        pairs = [
            ("apply, warm", "patchkit apply", None),
            ("apply, cold", "cold apply", None),
            ("apply, CLI (start-up incl.)", "patchkit CLI apply", None),
            ("apply+revert, warm", "patchkit apply", "patchkit revert"),
            ("apply+revert, cold", "cold apply", "cold revert"),
            ("apply+revert, CLI", "patchkit CLI apply", "patchkit CLI revert"),
        ]
        wall = dict(med, **{"cold apply": cold, "cold revert": cold_revert})
        print(
            f"{'ratios (wall clock | CPU)':30s} {'/quilt':>15s} {'/git apply':>17s}   "
            "(goal: apply <= 0.25x quilt, <= 5x git apply)"
        )
        for label, a, r in pairs:
            out = []
            for t in (wall, mcpu):
                pk = t[a] + (t[r] if r else 0)
                q = t["quilt push -a"] + (t["quilt pop -a"] if r else 0)
                g = t["git apply"] + (t["git apply -R"] if r else 0)
                out.append((pk / q, pk / g))
            print(
                f"  {label:28s} {out[0][0]:6.3f} | {out[1][0]:5.3f}   {out[0][1]:6.1f}x | {out[1][1]:5.1f}x"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _ok(result):
    if result.exit_code:
        raise SystemExit(f"patchkit {result.op} failed: {result.to_json()}")


if __name__ == "__main__":
    main()
