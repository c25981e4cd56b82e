"""Shared test setup: tests never touch the real $HOME, ~/.ssh or global git config."""

import os
import signal
import sys

import pytest

# A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so
# would every program the tests start (an ignored signal survives exec): the Ctrl-C tests need
# SIGINT to reach their children, so give this process a handler again (reset to the default on
# exec in each child).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

sys.path.insert(0, os.path.dirname(__file__))
# tests mirror the package: tests/engine/ (apply pipeline), tests/author/ (authoring side), the
# rest here; the support modules and the crash tests' sample series are shared across them
for _room in ("engine", "author"):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), _room))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytest_plugins = ["upstream_fixtures", "sshd_support"]   # shared fixtures, one instance each


@pytest.fixture(autouse=True, scope="session")
def _isolated_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in ("HOME", "GIT_CONFIG_NOSYSTEM", "GIT_AUTHOR_NAME",
                                            "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                                            "GIT_COMMITTER_EMAIL")}
    os.environ.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="patchkit-test",
                      GIT_AUTHOR_EMAIL="test@patchkit.invalid", GIT_COMMITTER_NAME="patchkit-test",
                      GIT_COMMITTER_EMAIL="test@patchkit.invalid")
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
