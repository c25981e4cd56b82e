"""A fake host clock for the timing runtime's scenarios: import it before the runtime.

Importing this module replaces ``time.perf_counter_ns`` (which the runtime binds as its clock
when it is imported, and which the CUDA stand-in torch reads) by a counter that moves only when
the scenario says so: ``work(ns)`` is a phase that takes exactly ``ns``, and every read of the
clock costs ``STEP_NS`` (a timer call's own cost, so that two reads are never equal). A record
then holds exactly the times the scenario gave it, on a loaded machine as on an idle one.

The folder holding this file is the only thing a scenario adds to its sys.path beside the
runtime's own folder. A scenario that sets a fake clock also sets the idle flusher's pause
very long (PATCHKIT_TIMER_IDLE_FLUSH_MS): that thread waits in real time and would otherwise
read the clock from a second thread. Scenarios about real time (the idle flusher, signals,
forks that must see the other process's writes) keep the real clock.
"""

import time

STEP_NS = 100
NOW = [time.perf_counter_ns()]


def _read():
    NOW[0] += STEP_NS
    return NOW[0]


def work(ns):
    """A phase's work: the clock moves on by exactly ``ns`` nanoseconds."""
    NOW[0] += int(ns)


def advance_to(t_ns):
    """The clock is at least ``t_ns`` (a wait for a device that is behind)."""
    NOW[0] = max(NOW[0], int(t_ns))


_read.advance_to = advance_to  # how the CUDA stand-in sees that the clock is fake
time.perf_counter_ns = _read
