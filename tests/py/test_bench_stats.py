"""The benchmarks' interval of a median (bench/harness.py `median_interval`): the order statistics
it picks, checked against the binomial coverage they must reach, and the rounds too few for one."""

import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import harness  # noqa: E402


def coverage(n: int, k: int) -> float:
    """P(the k-th smallest of n <= the median <= the k-th largest), for any continuous distribution."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def test_order_statistics_of_the_interval():
    # (rounds, k): the k-th smallest and the k-th largest of the sorted rounds.
    for n, k in ((6, 1), (8, 1), (9, 2), (10, 2), (15, 4), (20, 6), (30, 10)):
        values = [float(v) for v in range(100, 100 + n)]
        assert harness.median_interval(values) == (100.0 + k - 1, 100.0 + n - k), n
        assert coverage(n, k) >= 0.95, n
        assert coverage(n, k + 1) < 0.95, n


def test_fifteen_rounds_in_any_order():
    values = [0.89, 0.73, 0.98, 0.83, 0.94, 0.91, 0.86, 0.90, 0.88, 0.95, 0.79, 0.92, 0.85, 0.97, 0.93]
    assert harness.median_interval(values) == (0.85, 0.94)  # the 4th and 12th of 15 sorted
    assert round(coverage(15, 4), 4) == 0.9648


def test_too_few_rounds_give_none():
    for n in range(1, 6):
        assert harness.median_interval([1.0] * n) is None
    assert round(coverage(5, 1), 4) == 0.9375
