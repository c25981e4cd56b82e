"""``--series auto`` reads each target before the operation; that read is bound by ``--timeout``
as the operation is, so a host that never answers fails within the timeout given, not within
ssh's own connect timeout (10 s). The host here is a port on 127.0.0.1 that accepts TCP and
never sends an SSH banner."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from support.cli import invoke


@pytest.fixture
def silent_port() -> Iterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.mark.parametrize("series", ["auto", "sglang-v0.5.9"])
def test_timeout_bounds_the_read_of_a_host_that_never_answers(silent_port, series, tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("")  # nothing from the user's own ~/.ssh/config
    start = time.monotonic()
    done = invoke(
        "patch.status",
        "--series",
        series,
        "--target",
        f"ssh://127.0.0.1:{silent_port}/opt/site",
        "--timeout",
        "1",
        "--ssh-config",
        str(config),
        timeout=60,
    )
    took = time.monotonic() - start
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"127.0.0.1:{silent_port}" in done.stdout + done.stderr
    assert "1 s" in done.stdout + done.stderr, (done.stdout, done.stderr)
    assert took < 5, f"{took:.1f} s with --timeout 1 (ssh's own connect timeout is 10 s)"
