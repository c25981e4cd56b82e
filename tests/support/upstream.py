"""Fixtures: pristine SGLang trees built from the real PyPI wheels (pinned sha256, cached).

Use from a test module with ``from upstream_fixtures import *`` or from conftest.py with
``pytest_plugins = ["upstream_fixtures"]``. Wheels come from the repo cache (.cache/upstream),
else from $PATCHKIT_WHEELHOUSE or /tmp/wh when present, else from PyPI through pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit.author import upstream

REPO = Path(__file__).resolve().parents[2]
SERIES_059 = REPO / "patches" / "sglang-v0.5.9"
EAGLE_WORKER = "python/sglang/srt/speculative/eagle_worker.py"
EAGLE_WORKER_WHEEL = "sglang/srt/speculative/eagle_worker.py"
EAGLE_WORKER_V2 = "python/sglang/srt/speculative/eagle_worker_v2.py"
EAGLE_WORKER_V2_WHEEL = "sglang/srt/speculative/eagle_worker_v2.py"
# What sglang-v0.5.9 / -v0.5.10 pin (0001-0007 time eagle_worker.py, 0008-0013 eagle_worker_v2.py):
# the trees below hold both unless a test asks for other files.
WORKER_FILES_WHEEL = (EAGLE_WORKER_WHEEL, EAGLE_WORKER_V2_WHEEL)
# The patches seriesgen appended to the hand-made 0.5.9 / 0.5.10 series (EAGLEWorkerV2).
V2_APPENDED = [
    "0008-v2-cycle.patch",
    "0009-v2-draft.patch",
    "0010-v2-draft-steps.patch",
    "0011-v2-verify.patch",
    "0012-v2-draft-extend-after-decode.patch",
    "0013-v2-prefill.patch",
]
PHASE_TIMER = "python/sglang/srt/speculative/phase_timer.py"
COMMIT_059 = "bbe9c7eeb520b0a67e92d133dfc137a3688dc7f2"


def default_wheelhouse() -> str | None:
    env = os.environ.get("PATCHKIT_WHEELHOUSE")
    if env:
        return env
    return "/tmp/wh" if Path("/tmp/wh").is_dir() else None


def sglang_files(version: str, paths=WORKER_FILES_WHEEL) -> dict[str, bytes]:
    """Bytes of wheel paths of sglang==version (wheel fetched and checked by sha256)."""
    wheel = upstream.fetch_wheel("sglang", version, wheelhouse=default_wheelhouse())
    assert wheel.trust == "pinned"
    return upstream.read_wheel_files(wheel.path, list(paths))


def sglang_checkout(
    version: str, dest: Path, *, git_repo: bool = False, paths=WORKER_FILES_WHEEL
) -> tuple[Path, str | None]:
    """A checkout-layout tree (python/sglang/...) of sglang==version; optionally a git repo."""
    return upstream.build_checkout_tree(
        sglang_files(version, paths),
        dest,
        package_prefix="python/",
        git_repo=git_repo,
        message=f"sglang {version} (files from the PyPI wheel)",
    )


def sglang_installed(version: str, dest: Path, paths=WORKER_FILES_WHEEL) -> Path:
    """A site-packages-like tree (sglang/..., sglang-<version>.dist-info/METADATA)."""
    return upstream.build_installed_tree(sglang_files(version, paths), dest, name="sglang", version=version)


def v1_part(series_dir: Path, dest: Path) -> Path:
    """A copy of a hand-made series without the EAGLEWorkerV2 patches seriesgen appended
    (V2_APPENDED) and without their file in the pin: the 27-hunk eagle_worker.py series the
    rebase tests and benchmarks relocate. Keeps the folder's name (rebase reports name it)."""
    dest = Path(dest) / Path(series_dir).name
    shutil.copytree(series_dir, dest)
    for name in V2_APPENDED:
        (dest / name).unlink(missing_ok=True)
    (dest / "series").write_text(
        "".join(
            ln
            for ln in (dest / "series").read_text().splitlines(keepends=True)
            if ln.split("#", 1)[0].strip() not in V2_APPENDED
            and "appended by patchkit.author.seriesgen" not in ln
        )
    )
    pin = upstream.read_pin(dest / "pin.toml")
    pin.files = {p: f for p, f in pin.files.items() if p != EAGLE_WORKER_V2}
    (dest / "pin.toml").write_text(upstream.format_pin(pin))
    return dest


@pytest.fixture
def series_059_v1(tmp_path) -> Path:
    """patches/sglang-v0.5.9 without 0008-0013 (eagle_worker.py only), in a temp folder."""
    return v1_part(SERIES_059, tmp_path / "v1-series")


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, GIT_CEILING_DIRECTORIES=str(Path(cwd).parent), GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd)
    )
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=check)


@pytest.fixture
def sglang_059_checkout(tmp_path) -> Path:
    """sglang 0.5.9's eagle_worker.py and eagle_worker_v2.py at python/sglang/... (plain folder)."""
    return sglang_checkout("0.5.9", tmp_path / "sglang-0.5.9")[0]


@pytest.fixture
def sglang_0510_checkout(tmp_path) -> Path:
    """sglang 0.5.10's eagle_worker.py (1052 lines) and eagle_worker_v2.py at python/sglang/..."""
    return sglang_checkout("0.5.10", tmp_path / "sglang-0.5.10")[0]


@pytest.fixture
def sglang_checkout_trees(tmp_path) -> dict[str, Path]:
    """Both releases as checkout-layout git repos: {"0.5.9": path, "0.5.10": path}.

    The repos' commits are their own (a wheel cannot reproduce upstream's commit).
    """
    return {v: sglang_checkout(v, tmp_path / f"sglang-{v}", git_repo=True)[0] for v in ("0.5.9", "0.5.10")}


@pytest.fixture
def sglang_059_installed(tmp_path) -> Path:
    """sglang 0.5.9 as an installed tree (site-packages layout with dist-info)."""
    return sglang_installed("0.5.9", tmp_path / "site-packages")


@pytest.fixture
def sglang_059_pristine() -> Path:
    """The cached pristine checkout-layout tree of 0.5.9 (read it, do not write to it)."""
    return upstream.pypi_tree(
        "sglang", "0.5.9", list(WORKER_FILES_WHEEL), layout="checkout", wheelhouse=default_wheelhouse()
    )


@pytest.fixture(scope="session")
def transformers_site(tmp_path_factory) -> Path:
    """The pinned transformers installed by the product's own code into a temporary site: one
    per test process (the profile tests apply and revert in it, and leave it pristine)."""
    from patchkit.profile import ensure_site
    from patchkit.profile.site import DEFAULT_SERIES

    dest = tmp_path_factory.mktemp("profile") / "tf-site"
    return ensure_site(DEFAULT_SERIES, dest, wheelhouse=default_wheelhouse(), log=lambda m: None)


def without_also_versions(path) -> bytes:
    """A file's bytes, without pin.toml's ``also_versions`` line: a shipped pin also names the
    .postN releases sharing its files (recorded by the coverage check); patch.rebase makes the
    pin of one release only."""
    data = Path(path).read_bytes()
    if Path(path).name != "pin.toml":
        return data
    return b"".join(ln for ln in data.splitlines(keepends=True) if not ln.startswith(b"also_versions"))
