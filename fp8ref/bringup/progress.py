"""A small progress bar on stderr for the long bring-up steps (exhaustive sweeps, the kernel matrix)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Counts work units of one step and redraws ``label [#####.....] done/total  eta`` in place.

    Disabled, it draws nothing, so callers never branch on it. On a terminal it redraws in place at most 10 times a
    second (the kernel matrix advances hundreds of times per second on a GPU); into a file or CI log, where "\r"
    does not overwrite, it writes one line every 10 seconds instead.

    Args:
        label: step name shown before the bar.
        total: number of units the step will report.
        enabled: draw at all (``--no-progress`` turns it off).
        stream: where to draw (stderr, so stdout stays clean for the summary).
    """

    _WIDTH = 30

    def __init__(self, label: str, total: int, *, enabled: bool = True, stream: TextIO | None = None):
        self.label = label
        self.total = max(int(total), 1)
        self.done = 0
        self.enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._interval_s = 0.1 if self._tty else 10.0
        self._start = time.monotonic()
        self._last_draw = self._start

    def advance(self, units: int = 1) -> None:
        self.done = min(self.done + units, self.total)
        now = time.monotonic()
        if now - self._last_draw >= self._interval_s:
            self._last_draw = now
            self._draw(now)

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            if self._tty:
                self._stream.write("\n")
                self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _draw(self, now: float) -> None:
        if not self.enabled:
            return
        frac = self.done / self.total
        filled = int(frac * self._WIDTH)
        elapsed = now - self._start
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        bar = "#" * filled + "." * (self._WIDTH - filled)
        line = f"{self.label} [{bar}] {self.done}/{self.total}  {elapsed:6.1f}s  eta {eta:6.1f}s"
        self._stream.write(f"\r{line}" if self._tty else f"{line}\n")
        self._stream.flush()
