r"""Progress of the long bring-up steps (exhaustive sweeps, the kernel matrix), drawn by tqdm's auto mode.

tqdm.auto picks the front end: a widget in Jupyter (when ipywidgets is installed), a bar redrawn in place in a
terminal. Into a file or a CI log, where "\r" does not overwrite, each redraw becomes its own line, at most one every
10 seconds, so a long log stays readable.
"""

from __future__ import annotations

import sys
import warnings
from typing import TextIO

from tqdm import TqdmWarning
from tqdm.std import tqdm as text_tqdm

__all__ = ["Progress"]


class _LineStream:
    """A file for tqdm that writes every redraw as a line of its own (for logs: no carriage returns)."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> None:
        line = text.replace("\r", "").rstrip()
        if line:
            self._stream.write(line + "\n")

    def flush(self) -> None:
        self._stream.flush()


class Progress:
    """Counts the work units of one step on a tqdm bar.

    Disabled, it draws nothing, so callers never branch on it.

    Args:
        label: the step's name, shown before the bar.
        total: number of units the step will report.
        enabled: draw at all (``--no-progress`` turns it off).
        stream: where to draw (stderr, so stdout stays clean for the summary).
    """

    def __init__(self, label: str, total: int, *, enabled: bool = True, stream: TextIO | None = None):
        stream = stream if stream is not None else sys.stderr
        tty = stream.isatty()
        # A terminal redraws in place up to 10 times a second (the kernel matrix advances hundreds of times a second
        # on a GPU); a log gets a line every 10 s.
        options = {
            "total": max(int(total), 1),
            "desc": label,
            "disable": not enabled,
            "file": stream if tty else _LineStream(stream),
            "mininterval": 0.1 if tty else 10.0,
            "dynamic_ncols": tty,
            "leave": True,
        }
        if not enabled:
            self._bar = text_tqdm(**options)  # draws nothing; the notebook front end would still warn without widgets
            return
        with warnings.catch_warnings():
            # Imported here, not at the top: in Jupyter without ipywidgets, importing tqdm.auto warns "IProgress not
            # found" (and then draws text, which is fine), also in processes that never draw a bar.
            warnings.filterwarnings("ignore", category=TqdmWarning)
            from tqdm.auto import tqdm as auto_tqdm

            self._bar = auto_tqdm(**options)

    @property
    def done(self) -> int:
        """Units reported so far (0 while the bar is disabled: a disabled tqdm counts nothing)."""
        return int(self._bar.n)

    def advance(self, units: int = 1) -> None:
        """Report ``units`` more units of work done.

        Args:
            units: how many units finished since the last call.
        """
        self._bar.update(units)

    def close(self) -> None:
        """Draw the bar's final state and release it; leaving a ``with`` block calls it."""
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
