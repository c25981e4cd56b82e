"""A benchmark command for profile.remote that records SGLang's own torch-profiler trace:
POST /start_profile (num_steps forward steps, then SGLang stops and writes the trace), run the
benchmark command given after `--` (its output passes through, so profile.remote still parses
it), wait for the trace, and summarise it: which patchkit phase ranges the trace names, and per
decode cycle ("cycle decode" range) the CUDA runtime calls inside it, grouped by how many
cudaEventRecord calls the cycle made (timed cycles record events, untimed ones do not).

    python bench/gpu/trace_load.py --port P --out DIR [--steps N] [--stack] -- BENCH...

Writes DIR/trace_summary.json; prints TRACE lines.  A measuring aid of the GPU harness.
"""

import argparse
import glob
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

PHASES = ("target_verify", "draft_forward", "verify_prepare", "accept", "draft_extend_after_decode")


def _post(port, path, body, timeout):
    req = urllib.request.Request(
        "http://127.0.0.1:%d%s" % (port, path),
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode(errors="replace")[:200]


def _load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def summarise(trace):
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    ann = [e for e in events if e.get("cat") == "user_annotation"]
    names = {}
    for e in ann:
        names[e["name"]] = names.get(e["name"], 0) + 1
    gpu_ann = {}
    for e in events:
        if e.get("cat") == "gpu_user_annotation":
            gpu_ann[e["name"]] = gpu_ann.get(e["name"], 0) + 1
    runtime = sorted(
        (e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"]
    )
    kernels = sorted(
        (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"]
    )
    cycles = sorted((e for e in ann if e["name"] == "cycle decode"), key=lambda e: e["ts"])
    rows = []
    import bisect

    rts = [e["ts"] for e in runtime]
    kts = [e["ts"] for e in kernels]
    for c in cycles:
        t0, t1 = c["ts"], c["ts"] + c["dur"]
        calls = {}
        for e in runtime[bisect.bisect_left(rts, t0) : bisect.bisect_right(rts, t1)]:
            if e.get("tid") != c.get("tid"):
                continue
            n, d = calls.get(e["name"], (0, 0.0))
            calls[e["name"]] = (n + 1, d + e["dur"])
        busy = sum(
            min(k["ts"] + k["dur"], t1) - max(k["ts"], t0)
            for k in kernels[bisect.bisect_left(kts, t0 - 50000) : bisect.bisect_right(kts, t1)]
            if k["ts"] + k["dur"] > t0
        )
        rows.append(dict(dur=c["dur"], calls=calls, busy=busy, rec=calls.get("cudaEventRecord", (0, 0))[0]))
    groups = {}
    for r in rows:
        groups.setdefault(r["rec"], []).append(r)
    out = {
        "annotations": dict(sorted(names.items(), key=lambda kv: -kv[1])[:40]),
        "gpu_annotations": dict(sorted(gpu_ann.items(), key=lambda kv: -kv[1])[:20]),
        "phases_present": {p: names.get(p, 0) for p in PHASES},
        "decode_cycles": len(rows),
        "by_event_records": {},
    }
    for rec, rs in sorted(groups.items()):
        api = {}
        for r in rs:
            for name, (n, d) in r["calls"].items():
                a = api.setdefault(name, [0, 0.0])
                a[0] += n
                a[1] += d
        out["by_event_records"][str(rec)] = {
            "cycles": len(rs),
            "cycle_us_median": statistics.median(r["dur"] for r in rs),
            "gpu_busy_us_median": statistics.median(r["busy"] for r in rs),
            "api_per_cycle": {
                k: [round(v[0] / len(rs), 2), round(v[1] / len(rs), 1)]
                for k, v in sorted(api.items(), key=lambda kv: -kv[1][1])[:14]
            },
        }
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--stack", action="store_true", help="SGLang's default with_stack/record_shapes")
    ap.add_argument("--wait", type=float, default=90)
    a = ap.parse_args(argv[:cut])
    bench = argv[cut + 1 :]
    os.makedirs(a.out, exist_ok=True)
    body = {"output_dir": a.out, "num_steps": a.steps, "activities": ["CPU", "GPU"]}
    if not a.stack:
        body.update(with_stack=False, record_shapes=False)
    t0 = time.time()
    try:
        status, text = _post(a.port, "/start_profile", body, timeout=60)
        print("TRACE start_profile %s %.1fs: %s" % (status, time.time() - t0, text.strip()), flush=True)
    except Exception as exc:
        print("TRACE start_profile failed after %.1fs: %r" % (time.time() - t0, exc), flush=True)
    rc = subprocess.call(bench)
    print("TRACE bench rc=%d after %.1fs" % (rc, time.time() - t0), flush=True)
    deadline = time.time() + a.wait
    files = []
    while time.time() < deadline:
        files = [f for f in glob.glob(os.path.join(a.out, "*")) if ".json" in f or ".trace" in f]
        if files:
            time.sleep(2)  # let the export finish
            break
        time.sleep(1)
    summary = {"request": body, "bench_rc": rc, "files": [os.path.basename(f) for f in files]}
    for f in files:
        try:
            summary.update(summarise(_load(f)))
            summary["trace_file"] = os.path.basename(f)
            summary["trace_bytes"] = os.path.getsize(f)
            break
        except Exception as exc:
            summary["error"] = "%s: %r" % (os.path.basename(f), exc)
    with open(os.path.join(a.out, "trace_summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(
        "TRACE files=%s decode_cycles=%s phases=%s"
        % (summary["files"], summary.get("decode_cycles"), summary.get("phases_present")),
        flush=True,
    )
    for rec, g in summary.get("by_event_records", {}).items():
        print(
            "TRACE records=%s cycles=%d cycle_us=%.0f gpu_busy_us=%.0f api=%s"
            % (
                rec,
                g["cycles"],
                g["cycle_us_median"],
                g["gpu_busy_us_median"],
                json.dumps(dict(list(g["api_per_cycle"].items())[:8])),
            ),
            flush=True,
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
