"""Import mode's start-up cost, side by side with a plain import, on the embedded default.

    PYTHONPATH=. nice python bench/import_hook_cost.py [--reps 7]

The pinned transformers 5.17.0 is installed into a temporary site (the wheel cache, as
profile.run does) and the hook folder written for it (patchkit.engine.importmode). Two
measurements, the two arms interleaved rep by rep so that both see the same machine load:

1. In one process: the hook's own work (read hook.json, sha256 and line count of the two
   pinned files, every expected line checked, the plan spliced: ``import_hook.prepare``) plus
   compiling the patched modules, against compiling the originals (what a plain import of a
   tree without .pyc does: pip --no-compile, or a read-only tree).
2. Whole processes: ``python -c "import transformers.generation.utils, ...candidate_generator"``
   with the site on PYTHONPATH (plain) and with the hook folder first (import mode), both with
   PYTHONDONTWRITEBYTECODE=1, so that neither finds nor writes a .pyc of the pinned modules.

Prints medians and the ratios; writes bench/results/import_hook_cost.txt.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.engine.importmode import import_env, write_hook
from patchkit.profile import ensure_site
from patchkit.profile.site import DEFAULT_SERIES
from patchkit.timing import import_hook

RESULTS = Path(__file__).resolve().parent / "results"
PINNED = ("transformers/generation/utils.py", "transformers/generation/candidate_generator.py")
IMPORT = "import transformers.generation.utils, transformers.generation.candidate_generator"


def in_process(site: Path, hook_dir: Path) -> tuple[float, float]:
    """(plain: compile the originals, hook: prepare + compile the patched texts), seconds."""
    t0 = time.perf_counter()
    for rel in PINNED:
        path = site / rel
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    finder = import_hook.prepare(str(hook_dir))
    for filename, source, _ in finder.modules.values():
        compile(source, filename, "exec", dont_inherit=True)
    return plain, time.perf_counter() - t0


def one_process(env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORT], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pk-import-bench-") as tmp:
        site = ensure_site(DEFAULT_SERIES, Path(tmp) / "site", log=lambda m: None)
        hook = write_hook(str(DEFAULT_SERIES), str(site), Path(tmp) / "hook", layout="installed")
        plain_env = dict(os.environ, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
        hook_env = import_env(hook, plain_env)
        hook_env["PATCHKIT_IMPORT_QUIET"] = "1"
        one_process(plain_env)  # warm the page cache for both arms
        one_process(hook_env)
        rows: dict[str, list[float]] = {"compile": [], "hook": [], "proc_plain": [], "proc_hook": []}
        for rep in range(args.reps):
            plain, hooked = in_process(site, hook.path)
            rows["compile"].append(plain)
            rows["hook"].append(hooked)
            order = [("proc_plain", plain_env), ("proc_hook", hook_env)]
            for name, env in order if rep % 2 == 0 else reversed(order):
                rows[name].append(one_process(env))
    med = {k: statistics.median(v) for k, v in rows.items()}
    lines = [
        f"import mode start-up cost, transformers 5.17.0 (embedded default), {args.reps} interleaved reps, medians",
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs",
        "",
        "in one process (the two pinned modules):",
        f"  plain: compile the originals                 {med['compile'] * 1e3:8.1f} ms",
        f"  hook:  check + patch + compile the patched   {med['hook'] * 1e3:8.1f} ms",
        f"  ratio hook/plain                             {med['hook'] / med['compile']:8.2f}",
        f"  the hook's own cost (check + patch)          {(med['hook'] - med['compile']) * 1e3:8.1f} ms",
        "",
        f"whole process: python -c '{IMPORT}' (torch included)",
        f"  plain (site on PYTHONPATH)                   {med['proc_plain']:8.2f} s",
        f"  import mode (hook first)                     {med['proc_hook']:8.2f} s",
        f"  ratio import/plain                           {med['proc_hook'] / med['proc_plain']:8.3f}",
        "",
        "rerun: PYTHONPATH=. nice python bench/import_hook_cost.py --reps " + str(args.reps),
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "import_hook_cost.txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
