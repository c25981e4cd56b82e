"""A live progress line for the profile run: one line rewritten in place on a terminal.

On a terminal the line is redrawn (``\\r``) at most every ``interval`` seconds with the elapsed
time, so it keeps moving while a long generate() call runs. Elsewhere (CI logs, pipes) each
new stage is printed once as its own line, and nothing is redrawn.
"""

from __future__ import annotations

import sys
import time


def describe(event: dict) -> str:
    """Human text for one ``@@progress`` event of the workload."""
    stage = event.get("stage", "?")
    if stage in ("baseline", "assisted"):
        where = f"prompt {event['prompt'] + 1}/{event['prompts']}"
        if event.get("points", 1) > 1:
            label = event.get("label") or f"point {event['point'] + 1}"
            where = f"{label} ({event['point'] + 1}/{event['points']}), {where}"
        what = "plain generation" if stage == "baseline" else "assisted generation"
        return f"{what}, {where}"
    if stage == "build":
        return f"building the {event.get('size')} models on {event.get('device')}"
    return {
        "import": "importing torch and transformers",
        "warmup": "warming up",
        "done": "workload done",
    }.get(stage, stage)


class ProgressLine:
    def __init__(self, stream=None, prefix: str = "profile", interval: float = 0.25):
        self.stream = stream or sys.stderr
        self.prefix = prefix
        self.interval = interval
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.text = "starting"
        self.width = 0
        self.drawn_at = 0.0

    def update(self, text: str | None = None) -> None:
        now = time.monotonic()
        if text is not None and text != self.text:
            self.text = text
            if not self.live:
                self._write(f"{self.prefix}: [{now - self.start:6.1f} s] {text}\n")
                return
        elif not self.live or now - self.drawn_at < self.interval:
            return
        if self.live:
            line = f"{self.prefix}: [{now - self.start:6.1f} s] {self.text}"
            pad = max(0, self.width - len(line))
            self._write("\r" + line + " " * pad)
            self.width = len(line)
            self.drawn_at = now

    def close(self, final: str | None = None) -> None:
        if self.live and self.width:
            self._write("\r" + " " * self.width + "\r")
            self.width = 0
        if final:
            self._write(f"{self.prefix}: {final}\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass
