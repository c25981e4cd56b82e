"""Shared test setup: tests never touch the real $HOME, ~/.ssh or global git config."""

import os
import signal

import pytest

# A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so
# would every program the tests start (an ignored signal survives exec): the Ctrl-C tests need
# SIGINT to reach their children, so give this process a handler again (reset to the default on
# exec in each child).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# One room per package of patchkit/ (cli: the tasks, options and exit boundary; engine, author,
# report, profile, timing, transport), plus integration (several layers at once: fleets, the
# installed command, Ansible), faults (crash instants, kills, failures), series (the shipped
# series against their wheels) and project (the whole tree: layering, the Python floor, the
# tests' own layout). A helper that more than one test module uses is in the package support/,
# the only thing a test module imports from tests/ (never another test module); support/ is
# importable because pyproject.toml's `pythonpath` puts tests/ (and the repository root) on
# sys.path, and this file changes sys.path no further (tests/project/test_test_layout.py holds
# both). support's asserts are rewritten like the tests' own, for the same failure messages.
pytest.register_assert_rewrite("support")

pytest_plugins = ["support.upstream", "support.sshd"]  # shared fixtures, one instance each


# Markers (registered in pyproject.toml): a test module that needs a real sshd, real wheels or a
# lot of time says so itself (`pytestmark = [...]` at its top, or @pytest.mark on the one test).
# The marks below follow the shared fixtures that bring an sshd or a wheel tree, and are right
# here: whatever module uses such a fixture gets its mark without repeating it. `make test-fast`
# runs -m "not sshd and not wheels and not slow" with PATCHKIT_TEST_FAST=1, under which an
# unmarked test that fetches a wheel or starts an sshd fails, so no mark can silently be missing.
FIXTURE_MARKS = {
    "sshd": "sshd",
    "sshd_keys": "sshd",
    "sshd_factory": "sshd",
    "series_059_v1": "wheels",
    "sglang_059_checkout": "wheels",
    "sglang_0510_checkout": "wheels",
    "sglang_checkout_trees": "wheels",
    "sglang_059_installed": "wheels",
    "sglang_059_pristine": "wheels",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        marks = {FIXTURE_MARKS[f] for f in item.fixturenames if f in FIXTURE_MARKS}
        for mark in sorted(marks):
            item.add_marker(mark)


def pytest_runtest_setup(item):
    # `@pytest.mark.cuda`: asked only of a test about to run (torch's import takes seconds), and
    # decided here rather than by a skipif string, which pytest evaluates in the test's own module
    if item.get_closest_marker("cuda") is not None:
        from support.requires import has_cuda

        if not has_cuda():
            pytest.skip("needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _fast_subset_guard(request, monkeypatch):
    """Under PATCHKIT_TEST_FAST=1: a test not marked ``wheels`` (``sshd``) that fetches a wheel
    (starts an sshd) in this process fails, naming the marker it lacks."""
    if os.environ.get("PATCHKIT_TEST_FAST") != "1":
        return
    from patchkit.author import upstream
    from support import sshd as sshd_support

    def refuse(marker):
        def stop(*args, **kwargs):
            pytest.fail(
                f"{request.node.nodeid} needs the `{marker}` marker (@pytest.mark.{marker} on the test, "
                "or `pytestmark` at the top of its module)",
                pytrace=False,
            )

        return stop

    if request.node.get_closest_marker("wheels") is None:
        monkeypatch.setattr(upstream, "fetch_wheel", refuse("wheels"))
    if request.node.get_closest_marker("sshd") is None:
        monkeypatch.setattr(sshd_support, "start_sshd", refuse("sshd"))


@pytest.fixture(autouse=True, scope="session")
def _isolated_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    saved = {
        k: os.environ.get(k)
        for k in (
            "HOME",
            "GIT_CONFIG_NOSYSTEM",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL",
        )
    }
    os.environ.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="patchkit-test",
        GIT_AUTHOR_EMAIL="test@patchkit.invalid",
        GIT_COMMITTER_NAME="patchkit-test",
        GIT_COMMITTER_EMAIL="test@patchkit.invalid",
    )
    yield home
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def runtime_dir(tmp_path):
    """A folder holding the timing runtime as ``phase_timer.py``, importable as a plain module
    by a subprocess that puts the folder on sys.path."""
    import shutil

    from patchkit.timing import RUNTIME_PATH

    folder = tmp_path / "site"
    folder.mkdir()
    shutil.copyfile(RUNTIME_PATH, folder / "phase_timer.py")
    return folder
