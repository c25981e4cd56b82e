#!/usr/bin/env python3
"""A stand-in for `kubectl`, for tests only: there is no Kubernetes cluster on CI machines.

It answers the two commands patchkit runs, from a folder named by $PK_KUBECTL_STANDIN:
    pods.json     a list of pod objects (metadata.name/namespace/labels, status.phase,
                  status.containerStatuses) as the API server would hold them
    pods/<name>/  each pod's own file system part, bind-mounted over `mountpoint` (the path in
                  the file of that name) in a private mount namespace (`unshare -m`) while
                  `exec` runs, so every pod sees its own tree at the same absolute path
    fail          when present: its text goes to stderr and kubectl exits 1 (API unreachable)
    calls.log     every argv, one JSON list a line
  kubectl get pods -n NS -l SELECTOR -o json [--context X]
      the pods of NS whose labels match SELECTOR (=, ==, !=, key, !key, in, notin), as JSON
  kubectl exec -i POD [-c C] [--context X] -n NS -- CMD...
      CMD with this stdin inside POD's tree; a missing pod or container is an error as in kubectl
"""

import json
import os
import re
import subprocess
import sys


def main(argv):
    base = os.environ["PK_KUBECTL_STANDIN"]
    with open(os.path.join(base, "calls.log"), "a") as log:
        log.write(json.dumps(argv) + "\n")
    fail = os.path.join(base, "fail")
    if os.path.exists(fail):
        sys.stderr.write(open(fail).read())
        return 1
    with open(os.path.join(base, "pods.json")) as fh:
        pods = json.load(fh)
    if argv[:2] == ["get", "pods"]:
        opts = options(argv[2:])
        if opts.get("-o") != "json":
            sys.stderr.write("stand-in: only -o json\n")
            return 2
        items = [
            p
            for p in pods
            if p["metadata"].get("namespace") == opts.get("-n", "default")
            and matches(p["metadata"].get("labels", {}), opts.get("-l", ""))
        ]
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
        return 0
    if argv[:2] == ["exec", "-i"]:
        dash = argv.index("--")
        pod, opts, command = argv[2], options(argv[3:dash]), argv[dash + 1 :]
        found = [
            p
            for p in pods
            if p["metadata"]["name"] == pod and p["metadata"].get("namespace") == opts.get("-n", "default")
        ]
        if not found:
            sys.stderr.write(f'Error from server (NotFound): pods "{pod}" not found\n')
            return 1
        names = [c["name"] for c in found[0]["status"].get("containerStatuses", [])]
        if "-c" in opts and opts["-c"] not in names:
            sys.stderr.write(f"error: container {opts['-c']} not found in pod {pod}\n")
            return 1
        mountpoint = open(os.path.join(base, "mountpoint")).read().strip()
        return subprocess.call(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                'mount --bind "$1" "$2" && shift 2 && exec "$@"',
                "sh",
                os.path.join(base, "pods", pod),
                mountpoint,
                *command,
            ]
        )
    sys.stderr.write(f"stand-in: unsupported {argv}\n")
    return 2


def options(words):
    out, i = {}, 0
    while i < len(words):
        if words[i].startswith("-") and i + 1 < len(words):
            out[words[i]] = words[i + 1]
            i += 2
        else:
            i += 1
    return out


def matches(labels, selector):
    for term in re.split(r",(?![^(]*\))", selector):
        term = term.strip()
        m = re.fullmatch(r"(\S+)\s+(in|notin)\s*\((.*)\)", term)
        if m:
            values = {v.strip() for v in m.group(3).split(",")}
            if (labels.get(m.group(1)) in values) != (m.group(2) == "in"):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = re.split(r"==?", term, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term and term not in labels:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
