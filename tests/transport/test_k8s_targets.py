"""Kubernetes pods by label: `--target k8s:NAMESPACE/SELECTOR:ROOT` as one all-or-nothing fleet.

There is no Kubernetes cluster here (nor on CI), so `kubectl` is a stand-in
(tests/support/kubectl_standin.py): it serves `get pods` from a JSON list of pods with labels and phases,
filtering by the label selector as the API server does, and runs `exec` in each pod's own folder,
bind-mounted at the same absolute path in a private mount namespace (`unshare -m`). Everything
else is real: the invoke tasks, the target program under `sh`, sglang 0.5.9's files from its
pinned wheel, and the shipped series (chosen with `--series auto`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit.errors import InvalidInput
from patchkit.transport import parse_target
from patchkit.transport.inventory import inventory_transports
from patchkit.transport.k8s import check_context, parse_k8s
from support.cli import invoke as support_invoke
from support.upstream import sglang_installed

pytestmark = [pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
NS = "serving"
SELECTOR = "app=sglang,role=worker"
# pod -> (namespace, labels, phase, ready); the selector above picks w0, w1, w2 (running) and w3
# (pending: skipped); r0 has another role, x0 lives in another namespace
PODS = {
    "sglang-w0": (NS, {"app": "sglang", "role": "worker"}, "Running", True),
    "sglang-w1": (NS, {"app": "sglang", "role": "worker"}, "Running", True),
    "sglang-w2": (NS, {"app": "sglang", "role": "worker", "rack": "b"}, "Running", True),
    "sglang-w3": (NS, {"app": "sglang", "role": "worker"}, "Pending", False),
    "sglang-r0": (NS, {"app": "sglang", "role": "router"}, "Running", True),
    "sglang-x0": ("staging", {"app": "sglang", "role": "worker"}, "Running", True),
}
SELECTED = ["sglang-w0", "sglang-w1", "sglang-w2"]
WORKER = "sglang/srt/speculative/eagle_worker.py"


def _unshare_works() -> bool:
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return sglang_installed("0.5.9", tmp_path_factory.mktemp("pristine") / "site-packages")


@pytest.fixture
def cluster(tmp_path, pristine):
    """The stand-in's folder: pods.json, one tree per pod, the mount point, calls.log."""
    if shutil.which("unshare") is None or not _unshare_works():
        pytest.skip("needs `unshare -m` (a private mount namespace) for the stand-in pods")
    base = tmp_path / "cluster"
    (base / "pods").mkdir(parents=True)
    pods = []
    for name, (ns, labels, phase, ready) in PODS.items():
        shutil.copytree(pristine, base / "pods" / name / "site-packages")
        pods.append(
            {
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "status": {
                    "phase": phase,
                    "containerStatuses": [
                        {"name": "server", "ready": ready},
                        {"name": "sidecar", "ready": ready},
                    ],
                },
            }
        )
    (base / "pods.json").write_text(json.dumps(pods))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (base / "mountpoint").write_text(str(mnt))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(REPO / "tests" / "support" / "kubectl_standin.py", bin_dir / "kubectl")
    (bin_dir / "kubectl").chmod(0o755)
    return {
        "base": base,
        "root": f"{mnt}/site-packages",
        "bin": bin_dir,
        "env": dict(os.environ, PK_KUBECTL_STANDIN=str(base), PATH=f"{bin_dir}:{os.environ['PATH']}"),
    }


def snapshot(folder: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(folder):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(folder))] = p.read_bytes()
    return out


def pods_snapshot(cluster) -> dict[str, dict[str, bytes]]:
    return {name: snapshot(cluster["base"] / "pods" / name) for name in PODS}


def calls(cluster) -> list[list[str]]:
    log = cluster["base"] / "calls.log"
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def invoke(cluster, *args) -> subprocess.CompletedProcess:
    return support_invoke(*args, env=cluster["env"], timeout=180)


def target(cluster, selector=SELECTOR, ns=NS) -> str:
    return f"k8s:{ns}/{selector}:{cluster['root']}"


def test_apply_and_revert_across_the_selected_pods(cluster, pristine):
    before = pods_snapshot(cluster)
    r = invoke(
        cluster,
        "patch.apply",
        "--series",
        "auto",
        "--target",
        target(cluster),
        "--k8s-container",
        "server",
        "--json",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "chose sglang-v0.5.9" in r.stderr
    result = json.loads(r.stdout)
    assert [h["target"] for h in result["hosts"]] == [f"pod {NS}/{p}:{cluster['root']}" for p in SELECTED]
    assert all(h["state"] == "applied" and WORKER in h["written"] for h in result["hosts"])
    after = pods_snapshot(cluster)
    for name in PODS:
        worker = f"site-packages/{WORKER}"
        if name in SELECTED:
            assert after[name][worker] != before[name][worker]
            assert any(k.startswith("site-packages/.patchkit/") for k in after[name])
        else:  # pending, other role, other namespace: untouched
            assert after[name] == before[name], name
    # one listing, then per pod: auto-series probe, stage, commit; every exec as documented
    log = calls(cluster)
    assert [c[:2] for c in log].count(["get", "pods"]) == 1
    assert log[0] == ["get", "pods", "-n", NS, "-l", SELECTOR, "-o", "json"]
    execs = [c for c in log if c[0] == "exec"]
    assert len(execs) == 3 * len(SELECTED)
    for c in execs:
        assert c[:2] == ["exec", "-i"] and c[2] in SELECTED
        assert c[3:] == ["-c", "server", "-n", NS, "--", "sh", "-s"]

    r = invoke(cluster, "patch.apply", "--series", "auto", "--target", target(cluster))
    assert r.returncode == 0 and r.stdout.count("already applied") == len(SELECTED), r.stdout
    r = invoke(cluster, "patch.revert", "--series", "auto", "--target", target(cluster))
    assert r.returncode == 0, r.stdout + r.stderr
    assert pods_snapshot(cluster) == before


def test_one_drifted_pod_means_no_pod_is_patched(cluster):
    drifted = cluster["base"] / "pods" / "sglang-w1" / "site-packages" / WORKER
    drifted.write_bytes(drifted.read_bytes().replace(b"class EAGLEWorker", b"class EAGLEWorkr", 1))
    before = pods_snapshot(cluster)
    r = invoke(
        cluster, "patch.apply", "--series", "patches/sglang-v0.5.9", "--target", target(cluster), "--json"
    )
    assert r.returncode == 1, r.stdout + r.stderr
    hosts = {h["target"].split("/")[1].split(":")[0]: h for h in json.loads(r.stdout)["hosts"]}
    assert hosts["sglang-w1"]["state"] == "drifted"
    assert all(
        hosts[p]["state"] == "pristine" and not hosts[p]["written"] for p in ("sglang-w0", "sglang-w2")
    )
    assert pods_snapshot(cluster) == before  # the two that staged dropped their stage


def test_a_selector_that_matches_nothing_is_refused(cluster):
    before = pods_snapshot(cluster)
    r = invoke(
        cluster,
        "patch.apply",
        "--series",
        "patches/sglang-v0.5.9",
        "--target",
        target(cluster, "app=sglang,role=trainer"),
    )
    assert r.returncode == 1
    assert "matched no running pod in namespace serving" in r.stderr
    r = invoke(
        cluster,
        "patch.verify",
        "--series",
        "patches/sglang-v0.5.9",
        "--target",
        target(cluster, "app=sglang,role in (worker),!rack"),
        "--kube-context",
        "gke_p_z_c",
    )
    assert r.returncode == 0, r.stderr  # w0, w1 run (w2 has a rack label, w3 is pending)
    assert [
        "get",
        "pods",
        "-n",
        NS,
        "-l",
        "app=sglang,role in (worker),!rack",
        "-o",
        "json",
        "--context",
        "gke_p_z_c",
    ] in calls(cluster)
    assert pods_snapshot(cluster) == before


def test_kubectl_missing_or_failing(cluster):
    r = invoke(
        cluster,
        "patch.status",
        "--series",
        "patches/sglang-v0.5.9",
        "--target",
        target(cluster),
        "--kubectl",
        str(cluster["bin"] / "no-kubectl"),
    )
    assert r.returncode == 1
    assert "cannot start" in r.stderr and "no-kubectl" in r.stderr
    (cluster["base"] / "fail").write_text(
        "Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout\n"
    )
    r = invoke(cluster, "patch.apply", "--series", "patches/sglang-v0.5.9", "--target", target(cluster))
    assert r.returncode == 1
    assert "kubectl get pods failed (exit 1)" in r.stderr and "i/o timeout" in r.stderr


def test_pending_pods_only(cluster):
    r = invoke(
        cluster,
        "patch.check",
        "--series",
        "patches/sglang-v0.5.9",
        "--target",
        target(cluster, "app=sglang,role=worker,!rack,role notin (router)"),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["hosts"]) == 2  # w0, w1 (w2 has a rack label)
    pods = json.loads((cluster["base"] / "pods.json").read_text())
    for p in pods:
        if p["metadata"]["name"] != "sglang-w3":
            p["status"]["phase"] = "Succeeded"
    (cluster["base"] / "pods.json").write_text(json.dumps(pods))
    r = invoke(cluster, "patch.check", "--series", "patches/sglang-v0.5.9", "--target", target(cluster))
    assert r.returncode == 1
    assert "sglang-w3 (Pending)" in r.stderr and "sglang-w0 (Succeeded)" in r.stderr


@pytest.mark.parametrize(
    "spec, match",
    [
        ("k8s:Serving/app=x:/opt", "bad namespace"),
        ("k8s:serving/app=$(reboot):/opt", "bad label selector term"),
        ("k8s:serving/app=x;rm -rf /:/opt", "bad label selector term"),
        ("k8s:serving/-l=x:/opt", "bad label selector term"),
        ("k8s:serving/app in (a,b:/opt", "parentheses"),
        ("k8s:serving/:/opt", "selector is empty"),
        ("k8s:serving/app=x:relative", "k8s:NAMESPACE/SELECTOR"),
        ("k8s:serving/app=x:/opt/../etc", "'..'"),
        ("k8s:serving:/opt", "k8s:NAMESPACE/SELECTOR"),
    ],
)
def test_bad_specs_are_invalid_input(spec, match):
    with pytest.raises(InvalidInput, match=match) as info:
        parse_k8s(spec)
    assert info.value.exit_code == 2


def test_good_selectors_and_contexts_are_taken():
    sel = parse_k8s(
        "k8s:serving/app.kubernetes.io/name=sglang, tier!=cpu,gpu,!draining,zone in (a, b):/opt/site"
    )
    assert sel.namespace == "serving" and sel.root == "/opt/site"
    assert check_context("arn:aws:eks:us-east-1:123456789012:cluster/gpu", "t")
    with pytest.raises(InvalidInput, match="kube-context"):
        check_context("ctx;id", "t")


def test_bad_options_exit_2_before_kubectl_runs(cluster):
    for option, value, match in (
        ("--k8s-container", "Server_1", "bad --k8s-container"),
        ("--kube-context", "-x", "bad --kube-context"),
        ("--kubectl", "kubectl --insecure", "bad kubectl program"),
    ):
        r = invoke(
            cluster,
            "patch.status",
            "--series",
            "patches/sglang-v0.5.9",
            "--target",
            target(cluster),
            option,
            value,
        )
        assert r.returncode == 2 and match in r.stderr, (option, r.stderr)
    r = invoke(
        cluster,
        "patch.status",
        "--series",
        "patches/sglang-v0.5.9",
        "--target",
        target(cluster),
        "--container",
        "c1",
    )
    assert r.returncode == 2 and "--k8s-container, not --container" in r.stderr
    assert calls(cluster) == []


def test_missing_container_in_a_pod_is_refused(cluster):
    r = invoke(
        cluster,
        "patch.status",
        "--series",
        "patches/sglang-v0.5.9",
        "--target",
        target(cluster),
        "--k8s-container",
        "trainer",
    )
    assert r.returncode == 1 and "has no container 'trainer'" in r.stderr


def test_inventory_host_with_patchkit_k8s(cluster, tmp_path, monkeypatch):
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        f"[serving]\nworkers patchkit_k8s={NS}/{SELECTOR} "
        f"patchkit_root={cluster['root']} patchkit_k8s_container=sidecar\n"
    )
    monkeypatch.setenv("PK_KUBECTL_STANDIN", str(cluster["base"]))
    ts = inventory_transports(str(inv), kubectl=str(cluster["bin"] / "kubectl"))
    assert [t.label for t in ts] == [f"workers/{p}:{cluster['root']}" for p in SELECTED]
    assert ts[0].argv()[:8] == [
        str(cluster["bin"] / "kubectl"),
        "exec",
        "-i",
        "sglang-w0",
        "-c",
        "sidecar",
        "-n",
        NS,
    ]
    bad = tmp_path / "bad.ini"
    bad.write_text("workers patchkit_k8s=serving/app=$(x) patchkit_root=/opt\n")
    with pytest.raises(InvalidInput, match=r"bad\.ini:1: host 'workers': patchkit_k8s"):
        inventory_transports(str(bad), kubectl=str(cluster["bin"] / "kubectl"))
    # one pod where one target is needed (parse_target): fine; several: refused
    one = parse_target(f"k8s:{NS}/app=sglang,role=router:/opt", kubectl=str(cluster["bin"] / "kubectl"))
    assert one.label == f"pod {NS}/sglang-r0:/opt"
    with pytest.raises(InvalidInput, match="matched 3 running pods"):
        parse_target(target(cluster), kubectl=str(cluster["bin"] / "kubectl"))
