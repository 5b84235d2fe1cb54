"""One time limit for code that runs a submission: SIGALRM-based, nesting correctly.

``with time_limit(30, "the probes of 'mha'") as limit:`` stops the block with :class:`Expired`
after 30 s. Limits nest: inside an outer limit the shorter of the two applies; when the inner
one ends (in time or not) the outer one is re-armed with the time it has left, and when the
outer one is the shorter it stays in charge, so its expiry reaches the outer block even through
an inner ``except Expired`` (the exception says which limit expired: :meth:`Expired.of`).

:class:`Expired` is a ``BaseException``, so a submission's ``except Exception`` cannot swallow
it. Outside the main thread, or without ``signal.setitimer``, no limit applies (the block runs
to its end).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator


class Limit:
    """One armed limit (what :func:`time_limit` yields)."""

    def __init__(self, seconds: float, what: str):
        self.seconds = seconds
        self.what = what
        self.deadline = time.monotonic() + seconds
        self.expired = False


class Expired(BaseException):
    """A time limit was reached; ``limit`` is the :class:`Limit` that expired."""

    def __init__(self, limit: Limit):
        super().__init__(f"{limit.what} took longer than {limit.seconds:g} s")
        self.limit = limit

    def of(self, limit: Limit) -> bool:
        """Whether this expiry is ``limit``'s own (not an outer limit's)."""
        return self.limit is limit


_ACTIVE: list[Limit] = []  # the limits in force, outermost first (main thread only)


def _usable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _arm() -> None:
    """Point SIGALRM at the limit that ends first among those in force."""
    waiting = [lim for lim in _ACTIVE if not lim.expired]  # an expired one is already propagating
    if not waiting:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return
    first = min(waiting, key=lambda lim: lim.deadline)

    def expire(signum, frame):
        first.expired = True
        raise Expired(first)

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(first.deadline - time.monotonic(), 1e-3))


@contextlib.contextmanager
def time_limit(seconds: float, what: str = "it") -> Iterator[Limit]:
    """Stop the block with :class:`Expired` after ``seconds`` (see the module docstring)."""
    limit = Limit(seconds, what)
    if not _usable():
        yield limit
        return
    previous = signal.getsignal(signal.SIGALRM) if not _ACTIVE else None
    _ACTIVE.append(limit)
    _arm()
    try:
        yield limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _ACTIVE.remove(limit)
        if _ACTIVE:
            _arm()
        elif previous is not None:
            signal.signal(signal.SIGALRM, previous)


def call_within(seconds: float, fn, what: str = "it"):
    """``fn()`` under :func:`time_limit`; its own expiry raises :class:`Expired` to the caller."""
    with time_limit(seconds, what):
        return fn()
