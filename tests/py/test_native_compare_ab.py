"""bench/native_compare.py --other-module: (x), (n''') on another build of the module, set against
(n''') round by round, each figure paired within its round."""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import native_compare  # noqa: E402


def rounds(rps: list[float], cpu: list[float], p99: list[float]) -> list[dict]:
    return [{"rps": r, "cpu_us": c, "p99": p} for r, c, p in zip(rps, cpu, p99)]


def test_other_build_paired_round_by_round():
    cap = {"n'''": rounds([1000, 1000, 800, 1000, 1000, 1000], [70, 72, 90, 71, 69, 70], [0] * 6),
           "x": rounds([1100, 900, 880, 1050, 1000, 1200], [68, 74, 85, 70, 69, 66], [0] * 6)}
    lat = {"n'''": rounds([0] * 6, [0] * 6, [500, 510, 520, 530, 540, 550]),
           "x": rounds([0] * 6, [0] * 6, [490, 530, 500, 530, 600, 540])}
    got = native_compare.other_table({"capacity": cap, "latency": lat}, 6, "median [min, max]")
    assert got == [
        "| the other build against this one, per round: median [min, max] | |",
        "|---|---|",
        # Ratios 1.10, 0.90, 1.10, 1.05, 1.00, 1.20: median 1.075 (1.08); 6 rounds give the 1st and 6th.
        "| throughput, (x) / (n''') | 1.08 [0.90, 1.20] (0.90 to 1.20) |",
        # Differences −2, +2, −5, −1, 0, −4: median −1.5.
        "| CPU µs per call, (x) − (n''') | -1.50 [-5.00, 2.00] (-5.00 to 2.00) |",
        # Differences −10, +20, −20, 0, +60, −10: median −5.
        "| p99 µs, (x) − (n''') | -5.00 [-20.00, 60.00] (-20.00 to 60.00) |",
        "| rounds in which (x) used more CPU a call | 1 of 6 |",
    ]


def test_the_other_build_is_a_column_of_the_targets():
    assert native_compare.LABELS["x"].startswith("(x) (n''')")
    assert native_compare.OTHER not in native_compare.CONFIGS.values()


def test_report_tables_ends_with_the_paired_table():
    def run(rps: float, cpu: float) -> list[dict]:
        return [{"rps": rps, "cpu_us": cpu, "user_us": cpu - 10, "sys_us": 10.0, "p50": 300.0, "p99": 500.0,
                 "errors": 0} for _ in range(2)]

    configs = {"a": "passthrough", "a'": "buffer", "c": "native", "n'''": "dynamic_access_log",
               "x": native_compare.OTHER}
    rows = {"a": run(1300, 57), "a'": run(1300, 57), "c": run(900, 100), "n'''": run(1100, 74), "x": run(1100, 70)}
    rss = {k: 65.0 for k in configs}
    out = native_compare.report_tables({"capacity": rows, "latency": rows}, rss, 2, "head", configs)
    i = out.index("| the other build against this one, per round: median [min, max] | |")
    assert out[i + 3] == "| CPU µs per call, (x) − (n''') | -4.00 [-4.00, -4.00] |"
    assert out[-1] == "| rounds in which (x) used more CPU a call | 0 of 2 |"


def test_the_other_builds_search_path_is_set_for_its_fronts_only(monkeypatch):
    var = "ENVOY_DYNAMIC_MODULES_SEARCH_PATH"
    harness = native_compare.harness
    monkeypatch.setenv(var, "/run/modules")
    with harness.search_path(pathlib.Path("/run/other")):
        assert os.environ[var] == "/run/other"
    assert os.environ[var] == "/run/modules"
    with harness.search_path(None):
        assert os.environ[var] == "/run/modules"
    monkeypatch.delenv(var)
    with harness.search_path("/run/other"):
        assert os.environ[var] == "/run/other"
    assert var not in os.environ
