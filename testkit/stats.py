"""Envoy's statistics, read from its admin port: the Prometheus text (`prometheus`, `filter_samples`,
`prom_value`, `prom_family`) and the plain `/stats` listing (`admin_stats`, `admin_counter`)."""

from __future__ import annotations

import re
import urllib.parse
from typing import Protocol


class Envoy(Protocol):
    """What these readers need of a running Envoy (`testkit.envoy.Envoy` is one)."""

    def admin_get(self, path: str, timeout: float = 2.0) -> tuple[int, str]: ...


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def prometheus(envoy: Envoy) -> dict[str, float]:
    """Every sample of admin `/stats/prometheus`, keyed exactly as printed: `name{labels}`
    (Envoy prints `{}` for untagged stats, e.g. `mcp_policy_allowed_total{}`)."""
    status, text = envoy.admin_get("/stats/prometheus")
    if status != 200:
        raise RuntimeError(f"/stats/prometheus: HTTP {status}")
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def filter_samples(envoy: Envoy) -> dict[str, float]:
    """`prometheus`: the filter's stats print under the same keys on either build
    (`mcp_policy_marks_set_total{}`; the native bootstraps turn on Envoy's runtime flag
    `testkit.native.STRIP_STAT_PREFIX`, which drops the `envoy_dynamicmodulescustom_` prefix)."""
    return prometheus(envoy)


def prom_value(envoy: Envoy, key: str) -> float:
    """One sample, by its exact printed key, e.g. `mcp_policy_denied_total{}`; KeyError if absent."""
    samples = prometheus(envoy)
    if key not in samples:
        raise KeyError(f"{key} not in /stats/prometheus; mcp samples: "
                       f"{sorted(k for k in samples if 'mcp_policy' in k)}")
    return samples[key]


def prom_family(samples: dict[str, float], name: str) -> dict[str, float]:
    """The samples of one metric family: `{labels text: value}`."""
    return {k[len(name):]: v for k, v in samples.items() if k.startswith(name + "{")}


def admin_stats(envoy: Envoy, regex: str) -> dict[str, int]:
    """The stats of admin `/stats?filter=REGEX` whose value is an integer (counters and gauges):
    `{name: value}`."""
    status, text = envoy.admin_get("/stats?filter=" + urllib.parse.quote(regex))
    assert status == 200, text
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(": ")
        if value.lstrip("-").isdigit():
            out[name] = int(value)
    return out


def admin_counter(envoy: Envoy, name: str) -> int:
    """The value of counter `name` in /stats (0 if absent)."""
    return admin_stats(envoy, "^" + re.escape(name) + "$").get(name, 0)
