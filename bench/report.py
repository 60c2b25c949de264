"""The output of bench/load.py: the results section of a markdown file (BENCHMARKS.md, between its
markers) and the latency plot. The configuration labels and the ratio list come in as arguments,
so that this module reads the results and nothing of load.py's tables.
"""

from __future__ import annotations

import pathlib
import statistics

BEGIN = "<!-- bench:results:begin (written by bench/load.py; edit above or below) -->"
END = "<!-- bench:results:end -->"


def fmt_ratio(s: dict, digits: int = 3) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"


def fmt_us(s: dict) -> str:
    return f"{s['median']:+.0f} [{s['min']:+.0f}, {s['max']:+.0f}]"


def plot(results: dict, path: pathlib.Path, labels: dict[str, str]) -> None:
    """The latency percentiles of (a)-(d); `labels`: configuration name -> its label in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    styles = {"a": "-", "a'": ":", "b": "-", "b'": "--", "c": "-", "d": "-", "e": "-."}
    for name in ["a", "a'", "b", "b'", "c", "d"]:
        if name not in results["configs"]:
            continue
        runs = results["configs"][name]["runs"]
        # Each percentile's median over the rounds.
        qs = sorted(runs[0]["latency_us"]["percentiles"], key=float)
        xs = [100 / (100 - float(q)) for q in qs]
        ys = [statistics.median(r["latency_us"]["percentiles"][q] for r in runs) for q in qs]
        ax.plot(xs, ys, styles[name], marker="o", ms=3, label=labels[name])
    ax.set_xscale("log")
    ticks = [1, 2, 4, 10, 100, 1000, 10000]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["0", "50", "75", "90", "99", "99.9", "99.99"])
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (µs)")
    ax.set_yscale("log")
    m = results["machine"]
    ax.set_title(f"wrk -t{results['params']['threads']} -c{results['params']['conns']}, 1 KiB tools/call, loopback, "
                 f"{m['nproc']} cores; each percentile's median over {results['params']['rounds']} rounds", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def render_results(res: dict, labels: dict[str, str], ratios: list[tuple[str, str, str]]) -> str:
    """The results section, markers included. `labels`: configuration name -> its label; `ratios`:
    (numerator, denominator, what) of each throughput ratio, in the order of the table."""
    m, p = res["machine"], res["params"]
    out = [BEGIN, "", f"### Latest run: {res['date']}", ""]
    out.append(f"Machine: {m['nproc']} cores, {m['cpu']}, {m['mem_gib']} GiB, Linux {m['kernel']}; load average "
               f"at start {' '.join(m['loadavg_start'])} (the machine is shared: see Noise). {res['envoy']}; "
               f"{m['wrk']}.")
    out.append(f"Load: `wrk -t{p['threads']} -c{p['conns']} -d{p['seconds']}s`, {p['rounds']} rounds, order reversed "
               f"every other round, {p['warmup']} s warm-up per configuration first. Ratios are per round; shown as "
               "median [min, max] over the rounds.")
    out += ["", "#### Ratios and targets", "", "| measure | median [min, max] | target | met |", "|---|---|---|---|"]
    t = res["targets"]
    for row in t:
        out.append(f"| {row['what']} | {row['value']} | {row['target']} | {row['met']} |")
    out += ["", "Informational ratios (no target):", "", "| ratio | median [min, max] |", "|---|---|"]
    for num, den, what in ratios:
        key = f"{num}/{den}"
        if key in res["ratios"] and what not in {r["what"] for r in t}:
            out.append(f"| {what} | {fmt_ratio(res['ratios'][key])} |")
    for key, what in [("p50_b_minus_a", "p50(b) − p50(a), µs"),
                      ("p99_b_minus_c", "p99(b) − p99(c), µs"), ("cpu_b_minus_a", "front Envoy CPU per request, (b) − (a), µs"),
                      ("cpu_b_minus_abuf", "front Envoy CPU per request, (b) − (a'), µs"),
                      ("cpu_c_minus_a", "front Envoy CPU per request, (c) − (a), µs"),
                      *[(k, f"front Envoy CPU per request, {k[4:-8]} − (a), µs") for k in res["diffs"]
                        if k.startswith("cpu_v:")]]:
        if key in res["diffs"]:
            out.append(f"| {what} | {fmt_us(res['diffs'][key])} |")
    out += ["", "#### Per configuration (medians over the rounds)", "",
            "| configuration | requests/s | p50 µs | p90 µs | p99 µs | p99.9 µs | front Envoy CPU µs/request | "
            "RSS MiB after the run | errors |", "|---|---|---|---|---|---|---|---|---|"]
    for name, c in res["configs"].items():
        s = c["summary"]
        out.append(f"| {labels[name]} | {s['rps']:.0f} | {s['p50']:.0f} | {s['p90']:.0f} | {s['p99']:.0f} | "
                   f"{s['p99.9']:.0f} | {s['cpu_us_per_req']:.1f} | {c['rss_kib'] / 1024:.1f} | {s['errors']} |")
    sat = res.get("saturation")
    if sat:
        out += ["", f"#### Near saturation: `wrk -t{p['threads']} -c{sat['conns']}`, {sat['rounds']} rounds", "",
                "| configuration | requests/s | p50 µs | p99 µs | front Envoy CPU µs/request | errors |",
                "|---|---|---|---|---|---|"]
        for name, c in sat["configs"].items():
            out.append(f"| {labels[name]} | {c['rps']:.0f} | {c['p50']:.0f} | {c['p99']:.0f} | "
                       f"{c['cpu_us_per_req']:.1f} | {c['errors']} |")
        out += ["", "| ratio | median [min, max] |", "|---|---|"]
        for key, ratio in sat["ratios"].items():
            out.append(f"| throughput {key} at -c{sat['conns']} | {fmt_ratio(ratio)} |")
    out += ["", "![latency percentiles of (a)-(d)](bench/latency.png)", ""]
    out += ["#### Footprint", "", "| wasm build | bytes | KiB |", "|---|---|---|"]
    for w in res["wasm"]:
        out.append(f"| {w['variant']} | {w['bytes']} | {w['bytes'] / 1024:.0f} |")
    out += ["", "| Envoy (concurrency 1 unless noted) | VmRSS MiB after the load rounds |", "|---|---|"]
    for inst, kib in res["rss"].items():
        out.append(f"| {inst} | {kib / 1024:.1f} |")
    g = res.get("grants")
    if g:
        out += ["", f"Memory per tracked grant: {g['grants']} distinct grants each called `vm_agent_exec` "
                f"(a per-grant minute limit) once ({g['seconds']:.1f} s); the filter's gauge "
                f"`mcp_policy_tracked_grants` went {g['tracked_before']} → {g['tracked_after']}. Envoy RSS grew "
                f"{g['rss0_kib'] / 1024:.1f} → {g['rss1_kib'] / 1024:.1f} MiB: **{g['bytes_per_grant']:.0f} bytes per "
                "grant** of RSS"
                + (f", and Envoy's heap (admin `/memory` `allocated`) by **{g['heap_bytes_per_grant']:.0f} bytes per grant**"
                   if g.get("heap_bytes_per_grant") is not None else "")
                + "; the keys and values stored are 97 bytes per grant (docs/src/cost-and-size.md, Shared data per grant)."]
    if res["micro"]:
        out += ["", "#### Micro benchmarks (`cargo bench`, criterion, native)", "",
                "| benchmark | median time | 95% CI | throughput |", "|---|---|---|---|"]
        for r in res["micro"]:
            tp = f"{r['mib_s']:.0f} MiB/s" if r["mib_s"] else ""
            out.append(f"| {r['id']} | {human_ns(r['ns'])} | {human_ns(r['lo'])} – {human_ns(r['hi'])} | {tp} |")
    out += ["", f"Raw data: `bench/results.json`. Total time of bench/load.py: {res['elapsed_s']:.0f} s.", "", END]
    return "\n".join(out)


def human_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def write_markdown(path: pathlib.Path, section: str, begin: str = BEGIN, end: str = END,
                   heading: str = "Results") -> None:
    """Replace what lies between `begin` and `end` in `path` with `section` (which carries the markers
    itself); without the markers, append `section` under `## heading`."""
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{begin}\n{end}\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + section + "\n"
    path.write_text(text)

