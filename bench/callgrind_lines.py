"""The code one call runs, in 64-byte cache lines, from a callgrind dump taken with `--dump-instr=yes`.

Under load, the code of a front Envoy's call does not stay in the CPU's first-level instruction
cache between two calls (a call runs some 250 KiB of Envoy's own code, against 32 KiB of that
cache), so each line of code a call runs is fetched again from further out. A second count beside
the instructions, not a price list: the profile-guided build runs about a third fewer lines than a
build without the profile and saves more time than its fewer instructions take, but a build that ran
fewer lines by keeping shared code out of line was no faster (docs/src/deploy/native-cost.md, Code
lines per call).

A line's share of one call is `min(1, n / calls)`, where `n` is how often its most-run instruction
ran in the counted calls: a line every call runs counts 1, however often it runs within the call (a
loop); a line half the calls run counts one half. Summed per object (the file the code comes from),
that is how many distinct lines of its code a call runs, on average.

The same count in 4 KiB pages (`PAGE`, `spans_per_call`) is the instruction TLB's side of it. It
too is not a price list: the module's code moved onto one 2 MiB page made no difference in time
(native-cost.md, the same section).
"""

from __future__ import annotations

import collections
import pathlib
import re

LINE = 64
# A page of the processor's address translation: each page of code a call runs needs an entry of the
# instruction TLB (a few hundred on this machine's processors), found again by a page walk once
# evicted, which under a virtual machine walks two page tables.
PAGE = 4096

# A cost line: its instruction address (absolute `0x…`, or relative to the previous one: `+n`,
# `-n`, `*` the same), its source line (the same forms, or a number) and its events, Ir first.
_POSITION = r"(0x[0-9a-fA-F]+|[+-]\d+|\*)"
_COST = re.compile(rf"^{_POSITION}\s+(?:\S+\s+)?(\d+)")
# An object's name, which callgrind compresses: `(id) name` the first time, `(id)` after; `ob=` says
# whose code the cost lines below are, `cob=` names the object a call goes to (the same table).
_OBJECT = re.compile(r"^(ob|cob)=\((\d+)\)(?: (.*))?$")


def lines_per_call(dump: pathlib.Path, calls: int) -> dict[str, float]:
    """For each object of the dump (by file name), the lines of its code one call runs, on average."""
    return spans_per_call(dump, calls, (LINE,))[LINE]


def spans_per_call(dump: pathlib.Path, calls: int, sizes: tuple[int, ...]) -> dict[int, dict[str, float]]:
    """For each size of `sizes` (bytes, `LINE` or `PAGE`), and each object of the dump, the aligned
    spans of that size of its code one call runs, on average; the dump read once."""
    names: dict[str, str] = {}
    runs: collections.Counter[tuple[str, int]] = collections.Counter()
    obj, addr, call_cost = "", 0, False
    cost = _COST
    with dump.open(encoding="utf-8", errors="replace") as f:
        for raw in f:
            text = raw.rstrip("\n")
            if text.startswith("positions:"):
                positions = text.split(":", 1)[1].split()
                if positions[:1] != ["instr"]:
                    raise ValueError(f"{dump}: no instruction addresses (callgrind --dump-instr=yes)")
                if "line" not in positions:
                    cost = re.compile(rf"^{_POSITION}\s+(\d+)")
                continue
            named = _OBJECT.match(text)
            if named:
                kind, key, name = named.groups()
                if name is not None:
                    names[key] = name
                if kind == "ob":
                    obj = pathlib.PurePath(names.get(key, "?")).name
                continue
            if text.startswith("calls="):
                call_cost = True  # the next cost line is the call's inclusive cost, not its own
                continue
            m = cost.match(text)
            if not m:
                continue
            pos = m.group(1)
            if pos.startswith("0x"):
                addr = int(pos, 16)
            elif pos[0] in "+-":
                addr += int(pos)
            if call_cost:
                call_cost = False
                continue
            runs[(obj, addr)] += int(m.group(2))
    return {size: _share(runs, calls, size) for size in sizes}


def _share(runs: collections.Counter[tuple[str, int]], calls: int, size: int) -> dict[str, float]:
    """Per object, the spans of `size` bytes of its code one call runs (a span's share as a line's)."""
    spans: dict[tuple[str, int], int] = {}
    for (o, a), n in runs.items():
        span = (o, a // size)
        spans[span] = max(spans.get(span, 0), n)
    share: collections.Counter[str] = collections.Counter()
    for (o, _), n in spans.items():
        share[o] += min(1.0, n / calls)
    return dict(share)
