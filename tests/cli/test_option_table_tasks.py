"""Every invoke task's options are rows of the option table (patchkit.settings): the
authoring tasks, upstream.*, profile.report and profile.predict as well as the patch and profile
tasks. Each task's parameters are its rows, its help texts are theirs and the defaults its
signature holds are the rows' defaults."""

from __future__ import annotations

import inspect

import pytest

from patchkit import tasks
from patchkit.settings import offered

FRONTS = {
    "patch.edit": tasks.edit,
    "patch.new": tasks.new,
    "patch.refresh": tasks.refresh,
    "patch.gen-runtime": tasks.gen_runtime,
    "patch.export": tasks.export,
    "patch.gen-config": tasks.gen_config,
    "patch.rebase": tasks.patch_rebase,
    "patch.diff": tasks.patch_diff,
    "patch.series": tasks.list_series,
    "upstream.fetch": tasks.upstream_fetch,
    "upstream.pin": tasks.upstream_pin,
    "profile.report": tasks.profile_report,
    "profile.predict": tasks.profile_predict,
}


def _params(task) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(task.body).parameters.items() if n != "c"}


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_a_tasks_options_are_its_rows(front):
    task, rows = FRONTS[front], offered(front)
    params = _params(task)
    assert set(params) == set(rows), (sorted(set(params) - set(rows)), sorted(set(rows) - set(params)))
    for name, row in rows.items():
        assert task.help[name] == row.help_text, f"{front} --{name}"
        default = params[name].default
        if default is inspect.Parameter.empty:  # positional (required) options hold none
            continue
        if row.key is not None and not isinstance(row.default, bool):
            # a config key's option: None is "not given" (the config, then the row's default)
            assert default is None, f"{front} --{name}: signature {default!r}, not None"
        else:
            assert default == row.default, f"{front} --{name}: signature {default!r}, table {row.default!r}"


def test_every_task_of_the_collection_is_fed_by_the_table():
    """No task is left with a help text of its own: each one's options are rows of the table."""
    from patchkit.settings import OPTIONS

    fronts = {f for o in OPTIONS for f in o.fronts}
    for collection in (tasks.patch, tasks.profile, tasks.upstream):
        for name in collection.task_names:
            assert f"{collection.name}.{name}" in fronts, f"{collection.name}.{name}"


def test_a_stated_default_is_the_one_used():
    from patchkit.report.predict import BOOTSTRAP

    assert "(default 400;" in tasks.profile_predict.help["bootstrap"] and BOOTSTRAP == 400
    assert tasks.edit.help["layout"].endswith("(default checkout)")
