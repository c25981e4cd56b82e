"""A quick warm-up pass for the harness's servers: the benchmark's load shape without its start-up.

    python3 bench/gpu/warmup.py --port 30000 --prompts 64 --concurrency 32 --input-len 128 \
        --output-len 256

sglang.bench_serving spends about 20 s importing and loading its tokenizer before its first
request; on a tiny model that is several times the benchmark itself. This sends the same load
(PROMPTS requests of INPUT_LEN random token ids, OUTPUT_LEN tokens each with ignore_eos, at most
CONCURRENCY at a time, so the decode batch climbs to CONCURRENCY and drains the same way)
straight to SGLang's native ``/generate``, standard library only. Exit 0 when at least half of
the requests came back with tokens, else 1, so that ``warmup.py ... || BENCH`` falls back to the
real benchmark as the warm-up.

``--meta FILE`` makes it the benchmark as well: it keeps every answer's ``meta_info`` and writes
to FILE the sums that SGLang itself counted for these requests (``spec_correct_drafts_histogram``,
0.5.13+: verify steps by number of correct drafts; ``spec_verify_ct``; ``completion_tokens``),
and prints a result block in sglang.bench_serving's words (output token throughput, accept
length) for profile.remote to read. The harness compares that histogram with the one patchkit's
records give for the same server (bench/gpu/accept_check.py).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--meta", help="write SGLang's own per-request counts, summed, to this JSON file")
    args = ap.parse_args(argv)
    url = f"http://{args.host}:{args.port}/generate"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    rng = random.Random(1)
    prompts = [[rng.randrange(3, args.vocab) for _ in range(args.input_len)] for _ in range(args.prompts)]
    lock = threading.Lock()
    done: dict = {"ok": 0, "tokens": 0, "errors": [], "metas": []}

    def worker() -> None:
        while True:
            with lock:
                if not prompts:
                    return
                ids = prompts.pop()
            body = json.dumps(
                {
                    "input_ids": ids,
                    "sampling_params": {
                        "max_new_tokens": args.output_len,
                        "ignore_eos": True,
                        "temperature": 0,
                    },
                }
            ).encode()
            req = urllib.request.Request(
                url, data=body, method="POST", headers={"Content-Type": "application/json"}
            )
            for attempt in range(3):  # a connection refused or reset is tried again
                try:
                    with opener.open(req, timeout=args.timeout) as resp:
                        answer = json.loads(resp.read())
                    n = (answer.get("meta_info") or {}).get("completion_tokens") or len(
                        answer.get("output_ids") or []
                    )
                    with lock:
                        done["ok"] += 1 if n else 0
                        done["tokens"] += n or 0
                        done["metas"].append(answer.get("meta_info") or {})
                    break
                except (ConnectionError, urllib.error.URLError) as exc:
                    if attempt == 2:
                        with lock:
                            done["errors"].append(repr(exc)[:200])
                    time.sleep(0.2 * (attempt + 1))
                except Exception as exc:  # reported below; the caller falls back to the benchmark
                    with lock:
                        done["errors"].append(repr(exc)[:200])
                    break

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    print(
        f"warm-up: {done['ok']}/{args.prompts} requests answered, {done['tokens']} tokens "
        f"in {took:.1f} s ({done['tokens'] / took if took else 0:.0f} tok/s), concurrency "
        f"{args.concurrency}, {args.input_len} in / {args.output_len} out",
        flush=True,
    )
    for err in done["errors"][:3]:
        print(f"warm-up: error: {err}", flush=True)
    if args.meta:
        write_meta(args.meta, done["metas"], done["ok"], took)
    return 0 if done["ok"] * 2 >= args.prompts else 1


def write_meta(path: str, metas: list, answered: int, took: float) -> None:
    """SGLang's own counts over these requests, summed, to PATH; and a bench_serving-style block."""
    hist: list[int] = []
    verify = completion = missing = 0
    for meta in metas:
        h = meta.get("spec_correct_drafts_histogram")
        if not isinstance(h, list):
            missing += 1
            h = []
        if len(h) > len(hist):
            hist += [0] * (len(h) - len(hist))
        for k, n in enumerate(h):
            hist[k] += int(n)
        verify += int(meta.get("spec_verify_ct") or 0)
        completion += int(meta.get("completion_tokens") or 0)
    out = {
        "requests": len(metas),
        "requests_without_histogram": missing,
        "spec_correct_drafts_histogram": hist,
        "spec_verify_ct": verify,
        "completion_tokens": completion,
        "seconds": took,
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)
    print("============ Serving Benchmark Result ============")
    print(f"Successful requests:                     {answered}")
    print(f"Benchmark duration (s):                  {took:.2f}")
    print(f"Output token throughput (tok/s):         {completion / took if took else 0:.2f}")
    if verify:
        print(f"Accept length:                           {completion / verify:.2f}")
    print("==================================================", flush=True)


if __name__ == "__main__":
    sys.exit(main())
