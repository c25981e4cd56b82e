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
    args = ap.parse_args(argv)
    url = f"http://{args.host}:{args.port}/generate"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    rng = random.Random(1)
    prompts = [[rng.randrange(3, args.vocab) for _ in range(args.input_len)] for _ in range(args.prompts)]
    lock = threading.Lock()
    done = {"ok": 0, "tokens": 0, "errors": []}

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
    return 0 if done["ok"] * 2 >= args.prompts else 1


if __name__ == "__main__":
    sys.exit(main())
