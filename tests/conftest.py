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

pytest_plugins = ["upstream_fixtures", "sshd_support"]  # shared fixtures, one instance each


# Markers (registered in pyproject.toml): the modules that need a real sshd, real wheels or a lot
# of time, by file name (or file::test), and the shared fixtures that bring an sshd or a wheel tree, whatever
# module uses them. `make test-fast` runs -m "not sshd and not wheels and not slow" with
# PATCHKIT_TEST_FAST=1, under which an unmarked test that fetches a wheel or starts an sshd
# fails, so the table cannot silently fall behind.
MODULE_MARKS = {
    "test_authoring_cli.py": ("wheels",),
    "test_newer_series.py": ("wheels", "slow"),
    "test_rebase.py": ("wheels",),
    "test_rebase_merge.py": ("wheels", "slow"),
    "test_rebase_target.py": ("sshd", "wheels"),
    "test_rebase_v2.py": ("wheels",),
    "test_rebase_long.py": ("wheels", "slow"),
    "test_series_matrix.py": ("wheels", "slow"),
    "test_seriesgen.py": ("wheels", "slow"),
    "test_sglang_series.py": ("wheels",),
    "test_transformers_series.py": ("wheels",),
    "test_upstream.py": ("wheels",),
    "test_autoseries.py": ("sshd", "wheels"),
    "test_engine_recovery.py": ("sshd",),
    "test_layouts.py": ("wheels",),
    "test_pin_also_versions.py": ("wheels",),
    "test_plan_render.py::test_real_upstream_files_both_ways": ("wheels",),
    "test_fleet.py": ("sshd", "wheels"),
    "test_inventory.py": ("sshd", "wheels"),
    "test_ops_ssh.py": ("sshd", "wheels"),
    "test_profile_remote.py": ("sshd", "wheels"),
    "test_remote_sweep.py": ("sshd", "wheels"),
    "test_ssh_faults.py": ("sshd", "slow"),
    "test_transport_ssh.py": ("sshd", "wheels"),
    "test_engine_crash.py": ("slow",),
    "test_fuzz_inputs.py": ("slow",),
    "test_fleet_series.py": ("sshd", "wheels"),
    "test_profile_collect.py": ("sshd",),
    "test_k8s_targets.py": ("wheels",),
    "test_ansible_collection.py": ("sshd", "wheels"),
    "test_installed_command.py": ("wheels",),
    "test_profile_sample.py::test_remote_default_samples_with_one_seed_for_every_rank": ("wheels",),
    "test_profile_sample.py::test_remote_env_setting_wins_over_the_default": ("wheels",),
    "test_profile_sample.py::test_remote_bad_sampling_settings": ("wheels",),
    "test_unified.py::test_forward_and_reverse_diff_reproduce_apply_and_revert": ("wheels",),
    "test_engine_roundtrip.py::test_matches_git_apply": ("slow",),
    "test_profile_default.py::test_default_run_end_to_end": ("slow",),
    "test_profile_default.py::test_cli_with_a_relative_out_dir": ("slow",),
}
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
        marks = set(MODULE_MARKS.get(item.path.name, ()))
        marks |= set(MODULE_MARKS.get(f"{item.path.name}::{item.originalname}", ()))
        marks |= {FIXTURE_MARKS[f] for f in item.fixturenames if f in FIXTURE_MARKS}
        for mark in sorted(marks):
            item.add_marker(mark)


@pytest.fixture(autouse=True)
def _fast_subset_guard(request, monkeypatch):
    """Under PATCHKIT_TEST_FAST=1: a test not marked ``wheels`` (``sshd``) that fetches a wheel
    (starts an sshd) in this process fails, naming the marker it lacks."""
    if os.environ.get("PATCHKIT_TEST_FAST") != "1":
        return
    import sshd_support
    from patchkit.author import upstream

    def refuse(marker):
        def stop(*args, **kwargs):
            pytest.fail(
                f"{request.node.nodeid} needs the `{marker}` marker (@pytest.mark.{marker} on the test, "
                "or its module in tests/conftest.py MODULE_MARKS)",
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
