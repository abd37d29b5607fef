"""Stopping a training run cleanly on SIGTERM or Ctrl-C.

A scheduler that preempts a job sends SIGTERM (``torchrun`` passes it on to its workers), and
a user presses Ctrl-C; either ended the process at once and lost every step since the last
checkpoint. While a run trains, :class:`StopRequests` holds both signals back: the step under
way finishes, a checkpoint of it is written, and :class:`TrainingStopped` is raised, so the
same command resumes exactly there. A second signal while the run is stopping ends the process
the usual way (the checkpoint is written atomically, so nothing is half-written).

A signal that was ignored when the run began (``nohup``, a background job) stays ignored, and
handlers are only installed from the main thread, where Python runs them.
"""
from __future__ import annotations

import signal
import threading
from typing import Any, Dict, Optional

#: The signals a run stops on, by name (SIGTERM may be missing on some platforms).
STOP_SIGNALS = ("SIGTERM", "SIGINT")


class TrainingStopped(KeyboardInterrupt):
    """A run stopped by a signal after its checkpoint was written. ``summary`` is what
    :func:`elmo.training.trainer.train` returns for an unfinished run; ``signal_name`` the
    signal (``"SIGTERM"``, ``"SIGINT"``, or another process's when only it received one).

    A KeyboardInterrupt, so ``except Exception`` does not swallow a request to stop."""

    def __init__(self, signal_name: str, summary: Dict[str, Any]):
        self.signal_name, self.summary = signal_name, summary
        super().__init__(f"stopped by {signal_name} at step {summary['step']} of {summary['steps']}, "
                         f"with a checkpoint of that step: run the same command again to resume")

    @property
    def exit_status(self) -> int:
        """The shell's status of a process ended by that signal (143 for SIGTERM, 130 Ctrl-C)."""
        name = self.signal_name if self.signal_name in STOP_SIGNALS else "SIGTERM"
        return 128 + int(getattr(signal, name, signal.SIGINT))


class StopRequests:
    """A context in which SIGTERM and SIGINT are recorded (``received``), not acted on; the
    handlers that were there before come back on exit, or at a second signal, which is then
    handled by them."""

    def __init__(self) -> None:
        self.received: Optional[str] = None
        self._previous: Dict[int, Any] = {}

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            for name in STOP_SIGNALS:
                number = getattr(signal, name, None)
                if number is None or signal.getsignal(number) is signal.SIG_IGN:
                    continue
                self._previous[number] = signal.signal(number, self._record)
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    @property
    def requested(self) -> bool:
        return self.received is not None

    def _record(self, number: int, _frame) -> None:
        if self.received is not None:       # asked twice: stop now, the usual way
            self._restore()
            signal.raise_signal(number)
            return
        self.received = signal.Signals(number).name

    def _restore(self) -> None:
        for number, previous in self._previous.items():
            # None: a handler not installed from Python, which cannot be put back; the default
            signal.signal(number, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()
