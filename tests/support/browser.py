"""Open a page in headless Chromium and report what the browser saw (Chrome DevTools Protocol
over --remote-debugging-pipe: two pipes, NUL-terminated JSON, standard library only).

    seen = open_page(Path("report.html"), screenshot=out / "run.png")
    seen.requests      # every URL the page asked for (the page itself first)
    seen.errors        # console errors, exceptions, failed loads, CSP reports
    seen.dom           # the document after it loaded (outerHTML)

Debian's ``chromium`` (``make system-deps`` installs it). A fresh profile per page, and every
background service that could reach the network turned off, so that a request in ``requests``
is the page's own.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--remote-debugging-pipe",
]


def chromium() -> str:
    """The browser's path; a missing one fails the test (make system-deps installs it)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no chromium on PATH: `make system-deps` installs Debian's chromium package")


@dataclass
class Seen:
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dom: str = ""
    title: str = ""


class _Pipe:
    """One DevTools connection: commands out on the browser's fd 3, answers and events in on fd 4."""

    def __init__(self, write_fd: int, read_fd: int, timeout: float):
        self.write_fd, self.read_fd, self.timeout = write_fd, read_fd, timeout
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.write_fd, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict:
        for i, ev in enumerate(self.events):
            if ev.get("method") == method and ev.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            ev = self._read()
            if ev.get("method") == method and ev.get("sessionId") == session:
                return ev
            self.events.append(ev)

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.read_fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"the browser said nothing for {self.timeout} s")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise AssertionError("the browser closed its pipe")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\0", 1)
        return json.loads(line)


def open_page(path: Path, screenshot: Path | None = None, timeout: float = 60.0, width: int = 1280) -> Seen:
    """Load ``path`` (file://), let it settle, and collect what the browser saw; with
    ``screenshot``, a PNG of the whole page."""
    url = Path(path).resolve().as_uri()
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    profile = tempfile.mkdtemp(prefix="pk-chromium-")

    def fds():  # the protocol's fixed descriptors: the browser reads 3 and writes 4
        high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
        high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)

    proc = subprocess.Popen(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},900", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=fds,
        close_fds=False,
    )
    os.close(to_browser_r)
    os.close(from_browser_w)
    pipe = _Pipe(to_browser_w, from_browser_r, timeout)
    seen = Seen(url)
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Network", "Runtime", "Log", "Page"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.send("Page.navigate", {"url": url}, session=session)
        pipe.wait_for("Page.loadEventFired", session)
        time.sleep(0.3)  # anything a loaded page would still start
        seen.dom = pipe.send(
            "Runtime.evaluate",
            {"expression": "document.documentElement.outerHTML", "returnByValue": True},
            session=session,
        )["result"]["value"]
        seen.title = pipe.send(
            "Runtime.evaluate", {"expression": "document.title", "returnByValue": True}, session=session
        )["result"]["value"]
        if screenshot is not None:
            size = pipe.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shot = pipe.send(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
                },
                session=session,
            )
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        for ev in pipe.events:
            if ev.get("sessionId") != session:
                continue
            method, params = ev.get("method"), ev.get("params", {})
            if method == "Network.requestWillBeSent":
                seen.requests.append(params["request"]["url"])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "assert",
                "warning",
            ):
                seen.errors.append(
                    "console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                )
            elif method == "Runtime.exceptionThrown":
                seen.errors.append("exception: " + json.dumps(params["exceptionDetails"])[:500])
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                seen.errors.append(f"log {params['entry'].get('source')}: {params['entry'].get('text')}")
            elif method == "Network.loadingFailed":
                seen.errors.append(
                    f"failed load: {params.get('errorText')} {params.get('blockedReason') or ''}"
                )
        with contextlib.suppress(AssertionError):  # it may close before it answers
            pipe.send("Browser.close")
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(to_browser_w)
        os.close(from_browser_r)
        shutil.rmtree(profile, ignore_errors=True)
    return seen
