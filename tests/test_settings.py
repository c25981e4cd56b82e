"""Issue 20.1: one typed settings object for the patch.* tasks, every default in one place."""

from __future__ import annotations

import pytest
from invoke import Config, Context

from patchkit.errors import InvalidInput
from patchkit.ops import Options
from patchkit.settings import PATCHKIT_DEFAULTS, PatchSettings, check_config


def _context(tmp_path, project_yaml: str | None = None) -> Context:
    config = Config(defaults={"patchkit": dict(PATCHKIT_DEFAULTS)})
    if project_yaml is not None:
        path = tmp_path / "site.yaml"
        path.write_text(project_yaml)
        config.set_runtime_path(str(path))
        config.load_runtime()
    return Context(config=config)


def test_defaults_live_once():
    opts = Options()
    assert (opts.layout, opts.jobs, opts.timeout, opts.keep_journal) == (
        PATCHKIT_DEFAULTS["layout"], PATCHKIT_DEFAULTS["jobs"], PATCHKIT_DEFAULTS["timeout"],
        PATCHKIT_DEFAULTS["keep_journal"])
    from failure_support import REPO
    text = (REPO / "tasks.py").read_text()
    assert 'ns.configure({"patchkit": dict(PATCHKIT_DEFAULTS)})' in text


def test_option_beats_config_beats_default(tmp_path):
    c = _context(tmp_path, "patchkit:\n  jobs: 3\n  timeout: 7\n  series: s1\n")
    s = PatchSettings.from_invoke(c, "apply", {"target": ["/x"], "timeout": "2.5"})
    assert (s.jobs, s.timeout, s.series, s.layout, s.ssh_persist) == (3, 2.5, "s1", "auto", 60)
    opts = s.options()
    assert opts.jobs == 3 and opts.timeout == 2.5
    assert opts.transport_options == {"shared_master": True, "control_persist": 60.0}


def test_a_bad_config_value_names_the_key_and_file(tmp_path):
    c = _context(tmp_path, "patchkit:\n  jobs: many\n")
    with pytest.raises(InvalidInput, match=r"patchkit.jobs in .*site.yaml 'many': a whole number"):
        PatchSettings.from_invoke(c, "apply", {"target": ["/x"]})


def test_unknown_keys_and_the_old_series_name(tmp_path):
    with pytest.raises(InvalidInput, match=r"site.yaml: unknown setting patchkit.targts"):
        check_config(_context(tmp_path, "patchkit:\n  targts: []\n").config)
    c = _context(tmp_path, "patchkit:\n  engine:\n    series: old-name\n")
    assert any("patchkit.engine.series is the old name" in n for n in check_config(c.config))
    assert PatchSettings.from_invoke(c, "verify", {"target": ["/x"]}).series == "old-name"
