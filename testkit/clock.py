"""Clock alignment for the fixed-window rate limits (UTC window edges): plain Python.
"""

from __future__ import annotations

import time


def seconds_to_boundary(window_seconds: int, now: float | None = None) -> float:
    """Seconds until the next UTC boundary of a fixed window of `window_seconds`."""
    now = time.time() if now is None else now
    return window_seconds - (now % window_seconds)


def seconds_to_next_minute(now: float | None = None) -> float:
    """Seconds until the next UTC minute boundary (the rate limiter's fixed window edge)."""
    return seconds_to_boundary(60, now)


def boundary_wait(margin: float = 4.0, window_seconds: int = 60) -> float:
    """How long to sleep so that a burst of calls starting afterwards falls into one fixed UTC
    window (a minute unless told otherwise): past the next boundary if it is less than `margin` s
    away, else 0."""
    left = seconds_to_boundary(window_seconds)
    return left + 0.1 if left < margin else 0.0


def avoid_boundary(window_seconds: int, margin: float) -> float:
    """If the next UTC boundary of a fixed window of `window_seconds` is less than `margin` s away,
    sleep past it; returns the time slept."""
    wait = boundary_wait(margin, window_seconds)
    time.sleep(wait)
    return wait


def avoid_minute_boundary(margin: float = 4.0) -> float:
    """Sleep for `boundary_wait(margin)` seconds; returns the time slept."""
    return avoid_boundary(60, margin)


def sleep_to_next_second(offset: float = 0.02) -> float:
    """Sleep until `offset` s past the next whole UTC second; returns that second (epoch s)."""
    now = time.time()
    target = int(now) + 1
    time.sleep(target + offset - now)
    return target


def window_index(window_seconds: int, t: float | None = None) -> int:
    return int((time.time() if t is None else t) // window_seconds)
