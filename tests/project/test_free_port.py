"""The tests' port helper: a run of free ports outside the kernel's ephemeral range.

A CI run once failed with EADDRINUSE: a two-node test took P from the kernel (bind to port 0)
and its second node bound P+1, which nothing had checked and which an outgoing connection can
take at any moment. free_port(count) now checks every port of the run and draws below the
ephemeral range, where the kernel never hands out ports by itself."""

from __future__ import annotations

import socket

from support.sshd import _bindable, _ephemeral_low, free_port


def test_a_run_of_ports_is_free_and_outside_the_ephemeral_range():
    low = _ephemeral_low()
    for _ in range(20):
        port = free_port(3)
        assert port >= 10000 and port + 2 < low
        assert all(_bindable(port + i) for i in range(3))


def test_a_held_port_is_not_bindable():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        assert not _bindable(held.getsockname()[1])


def test_draws_differ():
    assert len({free_port() for _ in range(10)}) > 1
