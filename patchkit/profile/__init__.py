"""``make profile-run`` and ``invoke profile.sweep`` on the embedded default target.

The default target is transformers 5.17.0's assisted generation (real speculative decoding:
draft candidates, target verify forward, acceptance, KV-cache crop, candidate-count update),
instrumented by the series patches/transformers-v5.17.0 and run on small random Llama models
built from configs (no downloads), on the CPU here and on a CUDA GPU where there is one.

    from patchkit.profile import run_default, run_sweep
    run_default("profile-out", size="ci")                       # one profile run
    run_sweep("profile-out", size="ci", matrix={"num_assistant_tokens": [2, 4]})

Rooms: site (install the pinned wheel, the apply/revert bracket), workload (the subprocess
program), session (running it with a live progress line), local_run (profile.run), local_sweep
(profile.sweep); the SGLang run on remote targets is the subpackage remote/ (profile.remote:
remote.run, and remote.sweep for --matrix).
Importing this package is cheap: torch and transformers are imported by the subprocess only.
"""

from __future__ import annotations

__all__ = [
    "SIZE_NAMES",
    "ProfileError",
    "ProfileOutcome",
    "RemoteConfig",
    "SweepOutcome",
    "ensure_site",
    "parse_matrix",
    "run_default",
    "run_remote",
    "run_sweep",
]


def __getattr__(name):
    if name in ("run_default", "ProfileOutcome"):
        from patchkit.profile import local_run

        return getattr(local_run, name)
    if name in ("run_sweep", "parse_matrix", "SweepOutcome"):
        from patchkit.profile import local_sweep

        return getattr(local_sweep, name)
    if name in ("ProfileError", "ensure_site"):
        from patchkit.profile import site

        return getattr(site, name)
    if name in ("run_remote", "RemoteConfig"):
        from patchkit.profile import remote

        return getattr(remote, name)
    if name == "SIZE_NAMES":
        from patchkit.profile.workload import SIZE_NAMES

        return SIZE_NAMES
    raise AttributeError(f"module 'patchkit.profile' has no attribute {name!r}")
