"""The optional extras (pyproject.toml [project.optional-dependencies]) a task needs, checked
before the task touches anything: a missing one is refused (exit 1) with one line naming the
extra and the pip command, instead of a ModuleNotFoundError after an apply and a revert.

    require("profile", "profile.run")      # torch & co. for the embedded default's workload
    require("report", "profile.remote", instead="or give --no-chart")   # phases.png

The check looks modules up (importlib.util.find_spec) without importing them: cheap, and it
sees what ``import`` would, in this interpreter, which is also the one the workload runs in.
"""

from __future__ import annotations

import importlib.util
import sys

from patchkit.errors import Refused

# extra -> the top-level modules it brings that patchkit imports (pyproject.toml lists them)
EXTRAS: dict[str, tuple[str, ...]] = {
    "profile": (
        "torch",
        "numpy",
        "huggingface_hub",
        "tokenizers",
        "safetensors",
        "regex",
        "yaml",
        "packaging",
        "tqdm",
        "matplotlib",
    ),
    "report": ("matplotlib",),
    "inventory": ("yaml",),
    "ansible": ("ansible",),
}


# report.html's figures are matplotlib's: the page comes with the "report" extra, as phases.png does
PAGE_NEEDS = "the 'report' extra draws it: pip install 'patchkit[report]'"


class MissingExtra(Refused):
    """A task needs an extra that is not installed; nothing was touched (exit 1)."""


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` this interpreter cannot import (looked up, not imported)."""
    gone = []
    for name in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder that refuses it; a module without a spec
            found = False
        if not found:
            gone.append(name)
    return gone


def require(extra: str, task: str, *, instead: str = "") -> None:
    """Refuse (MissingExtra, exit 1) when a module of ``extra`` is missing; ``instead``: another
    way out said after the pip command (e.g. "or give --no-chart")."""
    gone = missing(extra)
    if gone:
        raise MissingExtra(
            f"{task} needs patchkit's {extra!r} extra: {', '.join(gone)} "
            f"{'is' if len(gone) == 1 else 'are'} not installed for {sys.executable} "
            f"(pip install 'patchkit[{extra}]'; with pipx: pipx install --force "
            f"'<checkout or wheel>[{extra}]'){' ' + instead if instead else ''}; nothing was touched"
        )
