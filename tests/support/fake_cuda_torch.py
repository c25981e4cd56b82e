"""A stand-in `torch` with a CUDA-like event API, for running the events mode on a CPU.

The runtime only needs torch.Event / torch.cuda.Event (record, query, synchronize,
elapsed_time), torch.cuda.is_available / is_initialized / synchronize / get_device_name,
torch.cuda.is_current_stream_capturing and torch.cuda.nvtx. Here an event "completes"
LAG_NS after it was recorded (a GPU running behind the host), its timestamp is the host
clock at record time, RECORD_SLEEP_NS makes each record() cost that much host time, and
every NVTX call is appended to NVTX_CALLS, RECORDS[0] counts record() calls; STREAM_LAG[0]
sets the lag of events recorded while it is set (a second stream further behind) and
ELAPSED_ERRORS[0] counts elapsed_time() calls that raised; current_device() is 3 and
SET_DEVICE lists (thread name, device) of every set_device() call.
`CAPTURING[0] = True` pretends a CUDA graph is being captured. Imported after
tests/support/clock/fake_clock.py, it reads that fake clock: record()'s cost and a wait for
the device move the clock on instead of spinning. Tests write this file as torch.py into a folder put first on sys.path.
"""

import sys
import time
import types

LAG_NS = 2_000_000
RECORD_SLEEP_NS = 0
NVTX_CALLS = []
RECORDS = [0]
CAPTURING = [False]
STREAM_LAG = [None]  # set: events recorded now complete this many ns later (another stream)
ELAPSED_ERRORS = [0]  # elapsed_time() calls that raised (an event not complete yet)
_perf = time.perf_counter_ns
_FAKE = hasattr(_perf, "advance_to")  # tests/support/clock/fake_clock.py was imported first


class Event:
    def __init__(self, device=None, enable_timing=False, **kwargs):
        self.t = None
        self.lag = LAG_NS

    def record(self, stream=None):
        RECORDS[0] += 1
        if RECORD_SLEEP_NS and _FAKE:
            _perf.advance_to(_perf() + RECORD_SLEEP_NS)
        elif RECORD_SLEEP_NS:
            end = _perf() + RECORD_SLEEP_NS
            while _perf() < end:
                pass
        self.t = _perf()
        self.lag = LAG_NS if STREAM_LAG[0] is None else STREAM_LAG[0]

    def query(self):
        return self.t is None or _perf() >= self.t + self.lag

    def synchronize(self):
        if _FAKE and self.t is not None:
            _perf.advance_to(self.t + self.lag)
        while not self.query():
            time.sleep(0.0001)

    def elapsed_time(self, other):
        if not (self.query() and other.query()):
            ELAPSED_ERRORS[0] += 1
            raise RuntimeError("CUDA error: device not ready")
        return (other.t - self.t) / 1e6


class _Nvtx:
    @staticmethod
    def range_push(name):
        NVTX_CALLS.append(("push", name))

    @staticmethod
    def range_pop():
        NVTX_CALLS.append(("pop",))


__version__ = "0.0-fake"
SET_DEVICE = []  # (thread name, device) of every torch.cuda.set_device call


def _set_device(device):
    import threading

    SET_DEVICE.append((threading.current_thread().name, device))


cuda = types.SimpleNamespace(
    Event=Event,
    current_device=lambda: 3,
    set_device=_set_device,
    is_available=lambda: True,
    is_initialized=lambda: True,
    synchronize=lambda: None,
    get_device_name=lambda: "fake GPU",
    is_current_stream_capturing=lambda: CAPTURING[0],
    nvtx=_Nvtx,
)
sys.modules.setdefault("torch.cuda", cuda)
