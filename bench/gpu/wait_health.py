"""Wait for an SGLang server's /health: python3 wait_health.py PORT PID SECONDS.

Exit 0 once /health answers 200, 1 when the process PID exits first or SECONDS pass."""

import os
import sys
import time
import urllib.request

port, pid, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
t0 = time.time()
while time.time() - t0 < limit:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        print(f"wait_health: the server exited after {time.time() - t0:.0f} s")
        sys.exit(1)
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200:
            print(f"wait_health: healthy after {time.time() - t0:.0f} s")
            sys.exit(0)
    except Exception:
        pass
    time.sleep(1)
print(f"wait_health: no answer within {limit:.0f} s")
sys.exit(1)
