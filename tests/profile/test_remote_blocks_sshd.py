"""--blocks hosts over real SSH: two loopback sshd servers, each a host of the design.

The same stand-in servers and benchmark as tests/profile/test_remote_budget.py's local-folder hosts,
reached through two real OpenSSH servers on 127.0.0.1 (the harness cannot lend two GPU hosts;
this is the part of "several hosts at once" a CPU can run for real).
"""

from __future__ import annotations

import math
import shlex

import pytest

from patchkit.profile.remote import RemoteConfig, run_remote_sweep
from support.remote_run import settings, state_of
from support.remote_sweep import alive_port_pids, host_commands, quiet, sweep_doc, two_trees
from support.sshd import free_port

pytestmark = pytest.mark.wheels


def test_hosts_as_blocks_over_two_sshd_servers(tmp_path, sshd_factory):
    fleet = sshd_factory(2)
    a, b = two_trees(tmp_path)
    targets = fleet.targets([str(a), str(b)])
    base = free_port(2)
    given = host_commands(tmp_path, base, f"--root-factor {shlex.quote(str(b))}=1.08")
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            targets,
            fleet.client_config,
            spread_cache=str(tmp_path / "spread.json"),
            matrix="tok-s=1000,1300",
            blocks="hosts",
            repeat=2,
            sweep_seed=7,
            **given,
        )
    )
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    labels = [f"ssh://{alias}{root}" for alias, root in zip(fleet.aliases, (a, b))]
    assert [blk["target"] for blk in doc["blocks"]] == labels
    assert [blk["port"] for blk in doc["blocks"]] == [base, base + 1]
    for row in doc["rows"]:
        # each point ran once on each host, through that host's own sshd
        assert sorted(r["block"] for r in row["runs"]) == labels
        assert all(r["ok"] for r in row["runs"])
    for record in doc["rounds"]:  # both hosts busy in every round, one point each
        assert sorted(record["blocks"].values()) == labels
    effects = doc["block_effects"]
    assert math.exp(effects[labels[1]] - effects[labels[0]]) == pytest.approx(1.08, rel=0.05)
    assert "2 targets as blocks at once" in outcome.table
    for server in fleet.servers:  # every host was reached over SSH
        assert server.accepted() > 0
    assert not alive_port_pids(tmp_path, base) and not alive_port_pids(tmp_path, base + 1)
    assert state_of(a) == "pristine" and state_of(b) == "pristine"
