"""One typed settings object for the patch.* tasks, every default in one place."""

from __future__ import annotations

import pytest
from invoke import Config, Context

from patchkit.errors import InvalidInput
from patchkit.ops import Options, options_from
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
        PATCHKIT_DEFAULTS["layout"],
        PATCHKIT_DEFAULTS["jobs"],
        PATCHKIT_DEFAULTS["timeout"],
        PATCHKIT_DEFAULTS["keep_journal"],
    )
    from support.failures import REPO

    text = (REPO / "patchkit" / "tasks.py").read_text()
    assert 'ns.configure({"patchkit": dict(PATCHKIT_DEFAULTS)})' in text


def test_option_beats_config_beats_default(tmp_path):
    c = _context(tmp_path, "patchkit:\n  jobs: 3\n  timeout: 7\n  series: s1\n")
    s = PatchSettings.from_invoke(c, "apply", {"target": ["/x"], "timeout": "2.5"})
    assert (s.jobs, s.timeout, s.series, s.layout, s.ssh_persist) == (3, 2.5, "s1", "auto", 60)
    opts = options_from(s)
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


def test_k8s_and_profile_keys_are_known_and_checked(tmp_path):
    """The k8s: target settings reach the transport options (an option beats them) and are
    checked as the options are; profile.sample/warmup/repeat are known keys."""
    c = _context(
        tmp_path,
        "patchkit:\n  kubectl: /opt/bin/kubectl\n  kube_context: gke_p_z_c\n"
        "  profile:\n    sample: 4\n    warmup: false\n    repeat: 2\n",
    )
    assert check_config(c.config) == []
    opts = options_from(PatchSettings.from_invoke(c, "status", {"target": ["/x"], "k8s_container": "server"}))
    assert {k: opts.transport_options.get(k) for k in ("kubectl", "kube_context", "k8s_container")} == {
        "kubectl": "/opt/bin/kubectl",
        "kube_context": "gke_p_z_c",
        "k8s_container": "server",
    }
    c = _context(tmp_path, "patchkit:\n  kube_context: 'a;b'\n")
    with pytest.raises(InvalidInput, match=r"patchkit.kube_context in .*site.yaml 'a;b': bad"):
        PatchSettings.from_invoke(c, "status", {"target": ["/x"]})
    with pytest.raises(InvalidInput, match=r"unknown setting patchkit.profile.sampel"):
        check_config(_context(tmp_path, "patchkit:\n  profile:\n    sampel: 4\n").config)
    with pytest.raises(InvalidInput, match=r"unknown setting patchkit.profile.remote.port_; did you mean "):
        check_config(_context(tmp_path, "patchkit:\n  profile:\n    remote:\n      port_: 4\n").config)
