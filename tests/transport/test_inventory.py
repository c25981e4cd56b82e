"""Ansible inventories (patchkit/transport/inventory.py): INI and YAML read alike, groups,
children, variable precedence, host ranges, --limit patterns, bad lines (exit 2 with file:line),
and a real fleet apply from an inventory over the loopback sshd (two hosts: two names for the
same server, each with its own root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit import ops
from patchkit.errors import InvalidInput
from patchkit.transport.inventory import inventory_transports, load_inventory, resolve_host
from patchkit.transport.ssh import SshTransport
from support.cli import invoke
from support.upstream import SERIES_059, sglang_installed

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
WORKER = "sglang/srt/speculative/eagle_worker.py"

INI = """\
# a GPU fleet
login1 ansible_host=10.0.0.9

[gpu]
gpu[01:03] ansible_host=10.0.1.1
gpu-big.example.org:2222 ansible_user=deploy patchkit_root=/srv/sglang

[rack1]
gpu01
gpu02 ansible_host=10.0.1.2 ansible_ssh_common_args='-o ProxyJump=bastion -p 2200'

[gpu:vars]
patchkit_root=/opt/venv/lib/python3.11/site-packages
ansible_user=ml

[rack1:vars]
ansible_ssh_private_key_file=~/.ssh/rack1

[prod:children]
gpu

[all:vars]
ansible_user=root
patchkit_root=/opt/default
"""

YAML = """\
all:
  hosts:
    login1:
      ansible_host: 10.0.0.9
  vars:
    ansible_user: root
    patchkit_root: /opt/default
  children:
    prod:
      children:
        gpu:
          hosts:
            gpu[01:03]:
              ansible_host: 10.0.1.1
            gpu-big.example.org:
              ansible_port: 2222
              ansible_user: deploy
              patchkit_root: /srv/sglang
          vars:
            patchkit_root: /opt/venv/lib/python3.11/site-packages
            ansible_user: ml
    rack1:
      hosts:
        gpu01:
        gpu02:
          ansible_host: 10.0.1.2
          ansible_ssh_common_args: -o ProxyJump=bastion -p 2200
      vars:
        ansible_ssh_private_key_file: ~/.ssh/rack1
"""

HOSTS = ["login1", "gpu01", "gpu02", "gpu03", "gpu-big.example.org"]


def write(tmp_path, name, text) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture(params=["hosts.ini", "hosts.yml"])
def inventory(request, tmp_path):
    text = INI if request.param.endswith(".ini") else YAML
    return load_inventory(write(tmp_path, request.param, text))


def test_groups_children_and_implicit_groups(inventory):
    assert list(inventory.hosts) == HOSTS
    assert inventory.group_hosts("prod") == {"gpu01", "gpu02", "gpu03", "gpu-big.example.org"}
    assert inventory.group_hosts("rack1") == {"gpu01", "gpu02"}
    assert inventory.group_hosts("ungrouped") == {"login1"}
    assert inventory.group_hosts("all") == set(HOSTS)


def test_variables_merge_as_ansible_does(inventory):
    home = str(Path.home())
    got = {name: resolve_host(inventory, name) for name in HOSTS}
    assert (got["login1"].address, got["login1"].user, got["login1"].root) == (
        "10.0.0.9",
        "root",
        "/opt/default",
    )  # all:vars only
    g1 = got["gpu01"]  # gpu:vars beat all:vars; rack1:vars add the key; host var the address
    assert (g1.address, g1.user, g1.port, g1.root) == (
        "10.0.1.1",
        "ml",
        None,
        "/opt/venv/lib/python3.11/site-packages",
    )
    assert g1.ssh_options == (f"IdentityFile={home}/.ssh/rack1",)
    g2 = got["gpu02"]  # the rack1 line's ansible_host beats the gpu[01:03] range's
    assert g2.address == "10.0.1.2"
    assert g2.ssh_options == (f"IdentityFile={home}/.ssh/rack1", "ProxyJump=bastion", "Port=2200")
    big = got["gpu-big.example.org"]  # host:port (INI) / ansible_port (YAML), host vars win
    assert (big.address, big.user, big.port, big.root) == (
        "gpu-big.example.org",
        "deploy",
        2222,
        "/srv/sglang",
    )
    assert resolve_host(inventory, "gpu03", root="/elsewhere").root == "/elsewhere"


@pytest.mark.parametrize(
    "pattern, hosts",
    [
        (None, HOSTS),
        ("all", HOSTS),
        ("*", HOSTS),
        ("gpu", ["gpu01", "gpu02", "gpu03", "gpu-big.example.org"]),
        ("rack1:login1", ["login1", "gpu01", "gpu02"]),  # union, inventory order
        ("rack1,gpu03", ["gpu01", "gpu02", "gpu03"]),
        ("gpu:!rack1", ["gpu03", "gpu-big.example.org"]),  # exclusion
        ("prod:&rack1", ["gpu01", "gpu02"]),  # intersection
        ("!gpu", ["login1"]),
        ("gpu0*", ["gpu01", "gpu02", "gpu03"]),  # wildcard
        ("~gpu0[13]", ["gpu01", "gpu03"]),  # regular expression
    ],
)
def test_limit_patterns(inventory, pattern, hosts):
    assert inventory.select(pattern) == hosts


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("gpu:gpux", "'gpux' is no host or group"),
        ("rack1:&login1", "leaves no host"),
        ("~gpu[", "bad regular expression"),
    ],
)
def test_limit_that_matches_nothing_is_refused(inventory, pattern, message):
    with pytest.raises(InvalidInput, match=message):
        inventory.select(pattern)


def test_host_ranges(tmp_path):
    inv = load_inventory(write(tmp_path, "r.ini", "[a]\nn[1:7:3]\nx-[a:c].lan:22\n[b]\nw[08:10]\n"))
    assert list(inv.hosts) == ["n1", "n4", "n7", "x-a.lan", "x-b.lan", "x-c.lan", "w08", "w09", "w10"]
    assert inv.hosts["x-b.lan"].vars["ansible_port"] == (22, 3)


BAD_INI = [
    ("[gpu\nh1\n", 1, "bad section header"),
    ("[gpu:hosts2]\nh1\n", 1, "unknown section kind"),
    ("[gpu]\nh1\n[gpu:vars]\nnot an assignment\n", 4, "expected key=value"),
    ("[gpu]\nh1 port22\n", 2, "expected key=value after the host name"),
    ("[gpu]\nh1 a='unclosed\n", 2, "cannot split"),
    ("[gpu]\nh1\n[nobody:vars]\nx=1\n", 3, "never defined"),
    ("[gpu:children]\ntwo words\n", 2, "expected one group name"),
    ("[gpu]\nh[3:1]\n", 2, "empty host range"),
    ("[gpu]\nh[01:5]\n", 2, "same width"),
    ("[a:children]\nb\n[b:children]\na\n[a]\nh\n", 4, "group cycle: a -> b -> a"),
    ("all:\n  hosts:\n    h1:\n", 1, "is this a YAML inventory"),
    ("[x:children]\nall\n", 2, "cannot be a child"),
    ("[gpu]\nh1 ansible_port=99999 patchkit_root=/x\n", 2, "bad ansible_port"),
    ("[gpu]\nh1\n[gpu:vars]\npatchkit_root=relative/dir\n", 4, "must be an absolute path"),
    ("[gpu]\nh1 patchkit_root=/x ansible_ssh_common_args='-X'\n", 2, "'-X' is not supported"),
    ("[gpu]\nh1 patchkit_root=/x ansible_connection=winrm\n", 2, "winrm is not supported"),
    ("[gpu]\nh1 patchkit_root='{{ root }}'\n", 2, "templates are not supported"),
    ("[gpu]\nh1\n", 2, "no patchkit_root"),
    ("[gpu]\nh;1 patchkit_root=/x\n", 2, "bad host"),
    ("# nothing\n", None, "lists no hosts"),
]

BAD_YAML = [
    ("all:\n  hosts:\n    - h1\n    - h2\n", 3, "must be a mapping, found a list"),
    ("all:\n  hostz:\n    h1:\n", 3, "unknown key 'hostz'"),
    ("all:\n  hosts:\n    h1: [1, 2]\n", 3, "must be a mapping"),
    ("all:\n  hosts:\n    h1:\n      patchkit_root: /x\n  vars: 3\n", 5, "must be a mapping"),
    ("all:\n  hosts:\n    h1:\n     bad: [\n", 5, "not valid YAML"),
    (
        "all:\n  children:\n    gpu:\n      hosts:\n        h1:\n          ansible_port: x22\n"
        "          patchkit_root: /x\n",
        6,
        "bad ansible_port",
    ),
]


@pytest.mark.parametrize(
    "text, line, message",
    BAD_INI + BAD_YAML,
    ids=[f"ini{i}" for i in range(len(BAD_INI))] + [f"yaml{i}" for i in range(len(BAD_YAML))],
)
def test_bad_inventories_name_file_and_line(tmp_path, text, line, message):
    name = "bad.yml" if (text, line, message) in BAD_YAML else "bad.ini"
    path = write(tmp_path, name, text)
    with pytest.raises(InvalidInput) as info:
        inventory_transports(path)
    where = f"{path}:{line}: " if line else f"{path}: "
    assert str(info.value).startswith(where), str(info.value)
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_cli_bad_inventory_exit_2_with_file_and_line(tmp_path):
    path = write(tmp_path, "hosts", "[gpu]\nh1 patchkit_root=/x\n[gpu:vars]\noops\n")
    proc = invoke("patch.status", "--series", str(SERIES_059), "--inventory", path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}:4: expected key=value in [gpu:vars]" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = invoke("patch.status", "--series", str(SERIES_059), "--target", str(tmp_path), "--limit", "gpu")
    assert proc.returncode == 2 and "give --inventory FILE" in proc.stderr


# ---- a real fleet from an inventory ---------------------------------------------------------------


def fleet_inventory(tmp_path, sshd, kind: str) -> tuple[str, list[Path]]:
    """Two hosts for the one loopback sshd: `a` by ansible_* variables alone (no ssh_config),
    `b` through its alias with the fixture's ssh_config (given with --ssh-config)."""
    roots = [sglang_installed("0.5.9", tmp_path / f"{n}" / "site-packages") for n in "ab"]
    known = f"{sshd.client_config}.known_hosts"
    common = (
        f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes "
        "-o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o IdentityAgent=none"
    )
    if kind == "ini":
        text = (
            f"[gpu]\na ansible_host=127.0.0.1 ansible_port={sshd.port} ansible_user=root "
            f"ansible_ssh_private_key_file={sshd.keys.user_key} "
            f"ansible_ssh_common_args='{common}' patchkit_root={roots[0]}\n"
            f"b ansible_host={sshd.alias}\n"
            f"[gpu:vars]\npatchkit_root={roots[1]}\n"
        )
        return write(tmp_path, "fleet.ini", text), roots
    text = (
        f"all:\n  children:\n    gpu:\n      hosts:\n"
        f"        a:\n          ansible_host: 127.0.0.1\n          ansible_port: {sshd.port}\n"
        f"          ansible_user: root\n"
        f"          ansible_ssh_private_key_file: {sshd.keys.user_key}\n"
        f"          ansible_ssh_common_args: {common}\n"
        f"          patchkit_root: {roots[0]}\n"
        f"        b:\n          ansible_host: {sshd.alias}\n"
        f"      vars:\n        patchkit_root: {roots[1]}\n"
    )
    return write(tmp_path, "fleet.yml", text), roots


def test_fleet_apply_from_an_ini_inventory(sshd, tmp_path):
    path, roots = fleet_inventory(tmp_path, sshd, "ini")
    original = (roots[0] / WORKER).read_bytes()
    common = ["--series", str(SERIES_059), "--inventory", path, "--ssh-config", str(sshd.client_config)]
    before = sshd.accepted()
    proc = invoke("patch.apply", *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name, root in zip("ab", roots):
        assert f"{name}:{root}" in proc.stdout  # the table names inventory hosts
        assert (root / WORKER).read_bytes() != original
        assert (root / ".patchkit" / "manifest").exists()
    # Both names reach one server: with the shared master, few logins for both hosts.
    sshd.wait_log(lambda s: s.accepted() > before)
    assert 1 <= sshd.accepted() - before <= 2
    proc = invoke("patch.status", *common, "--limit", "b", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"target": "b:{roots[1]}"' in proc.stdout and f"a:{roots[0]}" not in proc.stdout
    proc = invoke("patch.revert", *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for root in roots:
        assert (root / WORKER).read_bytes() == original


def test_fleet_from_a_yaml_inventory_is_all_or_nothing(sshd, tmp_path):
    path, roots = fleet_inventory(tmp_path, sshd, "yaml")
    original = (roots[0] / WORKER).read_bytes()
    with open(roots[1] / WORKER, "ab") as fh:
        fh.write(b"# drifted on host b\n")
    transports = inventory_transports(path, ssh_config=str(sshd.client_config))
    try:
        assert [type(t) for t in transports] == [SshTransport, SshTransport]
        assert [t.label for t in transports] == [f"a:{roots[0]}", f"b:{roots[1]}"]
        res = ops.apply(str(SERIES_059), transports)
        assert res.exit_code == 1 and [h.state for h in res.hosts] == ["pristine", "drifted"]
        assert (roots[0] / WORKER).read_bytes() == original  # two-phase: nothing anywhere
        (roots[1] / WORKER).write_bytes(original)
        res = ops.apply(str(SERIES_059), transports)
        assert res.exit_code == 0, res.to_json()
        assert ops.revert(str(SERIES_059), transports).exit_code == 0
    finally:
        for t in transports:
            t.close()
    for root in roots:
        assert (root / WORKER).read_bytes() == original


def test_local_connection_and_container_labels(tmp_path):
    from patchkit.transport import LocalTransport

    path = write(
        tmp_path,
        "local.ini",
        f"localhost ansible_connection=local patchkit_root={tmp_path}\n"
        "[gpu]\ngpu1 ansible_host=10.0.0.1 patchkit_root=/opt/sglang\n",
    )
    local, remote = inventory_transports(path)
    assert isinstance(local, LocalTransport) and local.root == str(tmp_path)
    assert local.label == f"localhost:{tmp_path}"
    assert (remote.host, remote.root, remote.label) == ("10.0.0.1", "/opt/sglang", "gpu1:/opt/sglang")
    (only,) = inventory_transports(path, limit="gpu", container="sglang", root="/sgl-workspace")
    assert only.label == "gpu1:/sgl-workspace via docker exec -i sglang"
    assert only.argv()[-1] == "docker exec -i sglang sh -s"


def test_group_vars_and_host_vars_directories(tmp_path):
    path = write(
        tmp_path, "hosts", "[gpu]\ngpu1\ngpu2 patchkit_root=/inline\n[gpu:vars]\nansible_user=inline\n"
    )
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("patchkit_root: /from/all\n")
    (tmp_path / "group_vars" / "gpu").mkdir()  # a directory of files, in order
    (tmp_path / "group_vars" / "gpu" / "10-user.yml").write_text("ansible_user: ml\n")
    (tmp_path / "group_vars" / "gpu" / "20-port.yaml").write_text("ansible_port: 2200\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu2").write_text("ansible_host: 10.0.0.2\npatchkit_root: /hv\n")
    inv = load_inventory(path)
    one, two = resolve_host(inv, "gpu1"), resolve_host(inv, "gpu2")
    assert (one.address, one.user, one.port, one.root) == ("gpu1", "ml", 2200, "/from/all")
    assert (two.address, two.user, two.port, two.root) == ("10.0.0.2", "ml", 2200, "/hv")
    # A bad value there is reported at its own file and line.
    (tmp_path / "host_vars" / "gpu2").write_text("ansible_host: 10.0.0.2\nansible_port: 0\n")
    with pytest.raises(InvalidInput) as info:
        resolve_host(load_inventory(path), "gpu2")
    assert str(info.value).startswith(f"{tmp_path / 'host_vars' / 'gpu2'}:2: ")
    assert "bad ansible_port" in str(info.value)
    (tmp_path / "group_vars" / "gpu" / "10-user.yml").write_text("- not\n- a mapping\n")
    with pytest.raises(InvalidInput, match=r"10-user\.yml:1: a variables file must be a mapping"):
        load_inventory(path)
