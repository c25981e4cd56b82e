"""Kubernetes pods by label: `k8s:NAMESPACE/SELECTOR:ROOT` is a fleet of one target per pod.

This module is the `k8s:` target kind (`KIND`, at the end). Its `expand`, which
patchkit.transport.expand_targets calls, replaces each such spec by the pods `kubectl get pods
-n NS -l SELECTOR -o json` lists as running with their containers ready, each an ExecTransport running
`kubectl exec -i POD [-c CONTAINER] [--context CTX] -n NS -- sh -s`. It is called before any
fleet logic (ops, --series auto, the tasks), so the pods are one fleet: apply stages on every pod
and commits only when all staged.

Everything that reaches kubectl's argv is validated here (exit 2 on anything unusual): the
namespace and container as Kubernetes names (DNS labels), the selector term by term as label
syntax (`k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`), the context, the
kubectl program and every pod name kubectl returns. kubectl is run without a shell, so a word
is always one argument.

Transport options used (the rest are the SSH ones, ignored here): kubectl (program, default
"kubectl"), k8s_container, kube_context, timeout, remote_shell.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

from patchkit.errors import InvalidInput, Refused, TransportError
from patchkit.transport import KindSetting, TargetKind, Transport, register_kind

PREFIX = "k8s:"
K8S_OPTIONS = ("kubectl", "k8s_container", "kube_context")
LIST_TIMEOUT = 60.0

# RFC 1123 label (namespaces, container names); subdomain (pod names, label-key prefixes)
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_SUBDOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?\Z")
# label names and values: 63 characters, alphanumeric at both ends, '-', '_', '.' inside
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[a-z0-9.-]{{0,251}}[a-z0-9])?/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_TERM = re.compile(
    rf"(?:!\s*(?P<absent>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|!=|=)\s*(?P<value>{_VALUE})"
    rf"|\s+(?P<setop>in|notin)\s*\(\s*(?P<values>{_VALUE}(?:\s*,\s*{_VALUE})*)\s*\))?)\Z"
)
# kubeconfig context names: GKE (gke_p_z_c), EKS ARNs (arn:aws:eks:…:cluster/name), user@cluster
_CONTEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/+-]{0,252}\Z")
_PROGRAM = re.compile(r"[A-Za-z0-9_./+-]+\Z")


@dataclass
class K8sSelection:
    spec: str
    namespace: str
    selector: str
    root: str


def parse_k8s(spec: str) -> K8sSelection:
    """`k8s:NAMESPACE/SELECTOR:ROOT`, every part checked (InvalidInput, exit 2)."""
    from patchkit.transport.remote import check_root

    rest = spec[len(PREFIX) :]
    namespace, slash, rest = rest.partition("/")
    selector, colon, root = rest.partition(":")
    if not slash or not colon or not root.startswith("/"):
        raise InvalidInput(
            f"target {spec!r}: write k8s:NAMESPACE/SELECTOR:/abs/path, e.g. "
            "k8s:serving/app=sglang,role=worker:/opt/venv/lib/python3.12/site-packages"
        )
    return K8sSelection(
        spec, check_namespace(namespace, spec), check_selector(selector, spec), check_root(root, spec)
    )


def check_namespace(name: str, spec: str) -> str:
    if not isinstance(name, str) or not _LABEL.match(name):
        raise InvalidInput(
            f"target {spec!r}: bad namespace {name!r} (a Kubernetes name: "
            "lowercase letters, digits and '-', at most 63)"
        )
    return name


def check_selector(selector: str, spec: str) -> str:
    """A label selector as kubectl -l takes it; refused unless every term is label syntax."""
    if not selector.strip():
        raise InvalidInput(f"target {spec!r}: the label selector is empty (e.g. app=sglang)")
    for term in _split_terms(selector, spec):
        m = _TERM.match(term)
        if not m:
            raise InvalidInput(
                f"target {spec!r}: bad label selector term {term!r} (key=value, "
                "key==value, key!=value, key, !key, key in (a,b), key notin (a,b))"
            )
    return selector.strip()


def _split_terms(selector: str, spec: str) -> list[str]:
    terms, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if depth < 0 or depth > 1:
            raise InvalidInput(f"target {spec!r}: unbalanced parentheses in the label selector")
        if ch == "," and depth == 0:
            terms.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if depth:
        raise InvalidInput(f"target {spec!r}: unbalanced parentheses in the label selector")
    return terms + [cur.strip()]


def check_container(name, spec: str) -> str:
    if not isinstance(name, str) or not _LABEL.match(name):
        raise InvalidInput(
            f"target {spec!r}: bad --k8s-container {name!r} (a Kubernetes name: "
            "lowercase letters, digits and '-', at most 63)"
        )
    return name


def check_context(name, spec: str) -> str:
    if not isinstance(name, str) or not _CONTEXT.match(name):
        raise InvalidInput(
            f"target {spec!r}: bad --kube-context {name!r} (letters, digits and "
            "'_.:@/+-', starting with a letter or digit)"
        )
    return name


def check_kubectl(program, spec: str) -> str:
    if not isinstance(program, str) or not _PROGRAM.match(program) or program.startswith("-"):
        raise InvalidInput(
            f"target {spec!r}: bad kubectl program {program!r} (a name or a path "
            "of letters, digits and '_./+-')"
        )
    return program


# ---- listing and expanding ------------------------------------------------------------------


def running_pods(
    sel: K8sSelection,
    *,
    kubectl: str = "kubectl",
    container: str | None = None,
    context: str | None = None,
    timeout: float | None = None,
) -> list[str]:
    """Names of the selected pods that run with their containers (or `container`) ready."""
    argv = [kubectl, "get", "pods", "-n", sel.namespace, "-l", sel.selector, "-o", "json"]
    if context:
        argv += ["--context", context]
    where = f"{sel.spec}"
    try:
        proc = subprocess.run(
            argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout or LIST_TIMEOUT
        )
    except FileNotFoundError as e:
        raise TransportError(
            f"{where}: cannot start {kubectl!r} to list the pods: {e.strerror} "
            "(install kubectl, or give --kubectl / patchkit.kubectl)"
        ) from e
    except PermissionError as e:
        raise TransportError(f"{where}: cannot start {kubectl!r}: {e.strerror}") from e
    except subprocess.TimeoutExpired as e:
        raise TransportError(
            f"{where}: kubectl get pods gave no answer within {timeout or LIST_TIMEOUT:g} s"
        ) from e
    if proc.returncode != 0:
        tail = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        raise TransportError(
            f"{where}: kubectl get pods failed (exit {proc.returncode})"
            + (f": {' | '.join(tail[-2:])}" if tail else "")
        )
    try:
        items = json.loads(proc.stdout.decode("utf-8", "replace")).get("items")
        if not isinstance(items, list):
            raise ValueError("no items list")
    except (ValueError, AttributeError) as e:
        raise TransportError(f"{where}: kubectl get pods did not print a pod list as JSON ({e})") from e
    ready, skipped = [], []
    for pod in items:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not _SUBDOMAIN.match(name):
            raise TransportError(f"{where}: kubectl listed a pod with an unusable name {name!r}")
        phase = status.get("phase", "?")
        statuses = {c.get("name"): bool(c.get("ready")) for c in status.get("containerStatuses") or []}
        if container is not None and container not in statuses and phase == "Running":
            raise Refused(
                f"{where}: pod {name} has no container {container!r} "
                f"(it has: {', '.join(map(str, statuses)) or 'none'})"
            )
        if meta.get("deletionTimestamp"):
            skipped.append(f"{name} (terminating)")
        elif phase != "Running":
            skipped.append(f"{name} ({phase})")
        elif not statuses or not (statuses[container] if container else all(statuses.values())):
            skipped.append(f"{name} (not ready)")
        else:
            ready.append(name)
    if not ready:
        seen = f"; it matched only pods not running and ready: {', '.join(skipped)}" if skipped else ""
        raise Refused(
            f"{where}: the selector {sel.selector!r} matched no running pod in "
            f"namespace {sel.namespace}{seen}; nothing done"
        )
    return ready


def pod_transports(sel: K8sSelection, *, label: str | None = None, **options) -> list[Transport]:
    """One ExecTransport per running pod of the selection; `label` prefixes each row's name."""
    from patchkit.transport.execprefix import ExecTransport
    from patchkit.transport.remote import positive_seconds, split_exec_prefix

    kubectl = check_kubectl(options.get("kubectl") or "kubectl", sel.spec)
    container = options.get("k8s_container")
    container = check_container(container, sel.spec) if container is not None else None
    context = options.get("kube_context")
    context = check_context(context, sel.spec) if context is not None else None
    timeout = positive_seconds(options.get("timeout"), "timeout", sel.spec)
    shell: tuple[str, ...] = ("sh", "-s")
    if options.get("remote_shell"):
        shell = tuple(split_exec_prefix(options["remote_shell"], sel.spec, "remote_shell"))
    out: list[Transport] = []
    for pod in running_pods(sel, kubectl=kubectl, container=container, context=context, timeout=timeout):
        prefix = [kubectl, "exec", "-i", pod]
        if container:
            prefix += ["-c", container]
        if context:
            prefix += ["--context", context]
        prefix += ["-n", sel.namespace, "--"]
        name = f"{label}/{pod}" if label else f"pod {sel.namespace}/{pod}"
        out.append(
            ExecTransport(
                label=f"{name}:{sel.root}", root=sel.root, prefix=tuple(prefix), shell=shell, timeout=timeout
            )
        )
    return out


def expand(
    spec: str,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> list[Transport]:
    """A `k8s:` spec's pods, one Transport each (the kind's expand; cwd is not used)."""
    if container is not None or exec_prefix is not None:
        raise InvalidInput(f"target {spec!r}: k8s: targets take --k8s-container, not --container or --exec")
    return pod_transports(parse_k8s(spec), **options)


def inventory_pods(
    value: str,
    *,
    root: str,
    host: str,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> list[Transport]:
    """The running pods of an inventory host with `patchkit_k8s: NAMESPACE/SELECTOR` (at its
    patchkit_root), rows named `HOST/POD:ROOT` (the kind's inventory hook)."""
    if container is not None or exec_prefix is not None:
        raise InvalidInput("patchkit_k8s hosts take --k8s-container, not --container or --exec")
    try:
        selection = parse_k8s(f"{PREFIX}{value}:{root}")
    except InvalidInput as e:
        raise InvalidInput(f"patchkit_k8s: {e.message}") from e
    return pod_transports(selection, label=host, **options)


def one_pod(spec: str, **kw) -> Transport:
    """A k8s: spec where one target is wanted: it must select exactly one running pod (fleets
    expand it into every pod first: patchkit.transport.expand_targets)."""
    pods = expand(spec, **kw)
    if len(pods) != 1:
        raise InvalidInput(
            f"target {spec!r}: the selector matched {len(pods)} running pods; "
            "here one target is needed (narrow the selector)"
        )
    return pods[0]


KIND = register_kind(
    TargetKind(
        "k8s",
        prefix=PREFIX,
        options=K8S_OPTIONS,
        expand=expand,
        resolve=one_pod,
        inventory_var="patchkit_k8s",
        inventory=inventory_pods,
        settings=(
            KindSetting(
                "k8s_container",
                "k8s: targets: the container of each pod to run in (kubectl exec -c)",
                check_container,
                "--k8s-container",
                example="server",
            ),
            KindSetting(
                "kube_context",
                "k8s: targets: the kubeconfig context (kubectl --context)",
                check_context,
                "--kube-context",
                example="gke_p_z_c",
            ),
            KindSetting(
                "kubectl",
                "k8s: targets: the kubectl program",
                check_kubectl,
                "kubectl program",
                default="kubectl",
                example="/opt/bin/kubectl",
            ),
        ),
    )
)
