#!/usr/bin/env python3
"""The layer order of crates/core/src, and its check (run by `make lint`).

Each top-level module of the core is one layer. A module may use its own layer and the layers below
it, never one above: every `crate::<layer>` path outside `#[cfg(test)]` code is checked against the
order below, and a path to a higher layer fails, naming file:line. Since the order is total, no two
layers can import each other (no cycle between layer folders). Paths inside one layer are not
checked here.

Usage: scripts/layers.py [CORE_SRC]   (default: crates/core/src beside this script's parent)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Bottom to top. Documented in crates/core/src/lib.rs.
LAYERS = [
    "terms",
    "wire",
    "identity",
    "limits",
    "policy",
    "rls",
    "config",
    "approval",
    "outcome",
    "pipeline",
    "response",
]

# The crate root (lib.rs) declares the layers and is above them all.
ROOT_FILES = {"lib.rs"}

PATH = re.compile(r"\bcrate::(\w+)")
GROUP = re.compile(r"\bcrate::\{([^}]*)\}")
TEST_ATTR = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")
ITEM_START = re.compile(r"^\s*(pub(\([\w:]+\))?\s+)?(mod|fn|impl|use|const|static|struct|enum)\b")


def code_lines(text: str):
    """(line number, code) of each line outside `#[cfg(test)]` items, comments removed."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if TEST_ATTR.match(lines[i]):
            j = i + 1
            while j < len(lines) and not ITEM_START.match(lines[j]):
                j += 1  # further attributes
            if j < len(lines) and lines[j].rstrip().endswith(";"):
                i = j + 1
                continue
            depth, opened = 0, False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                opened = opened or "{" in lines[j]
                if opened and depth <= 0:
                    break
                j += 1
            i = j + 1
            continue
        code = lines[i].split("//", 1)[0]
        yield i + 1, code
        i += 1


def layer_of(path: Path, src: Path) -> str | None:
    rel = path.relative_to(src)
    if rel.name in ROOT_FILES and len(rel.parts) == 1:
        return None
    top = rel.parts[0]
    return top[:-3] if top.endswith(".rs") else top


def main() -> int:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "crates/core/src"
    rank = {name: n for n, name in enumerate(LAYERS)}
    errors = []
    seen = set()
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if rel.name == "tests.rs" or "tests" in rel.parts[:-1]:
            continue  # unit tests of a module (`#[cfg(test)] mod tests;`)
        own = layer_of(path, src)
        if own is None:
            continue
        if own not in rank:
            errors.append(f"{path}: top-level module `{own}` is not in the layer list of scripts/layers.py")
            continue
        seen.add(own)
        lines = dict(code_lines(path.read_text(encoding="utf-8")))
        text = "\n".join(lines.get(n, "") for n in range(1, max(lines, default=0) + 1))
        uses = [(m.start(), m.group(1)) for m in PATH.finditer(text)]
        for group in GROUP.finditer(text):  # `crate::{a, b::c}`, over several lines too
            uses += [(group.start(), part.strip().split("::")[0]) for part in group.group(1).split(",") if part.strip()]
        for at, name in uses:
            if name in ("self", "super") or name == own or name not in rank:
                continue  # its own layer, or an item of lib.rs (e.g. VERSION)
            if rank[name] > rank[own]:
                line_no = text.count("\n", 0, at) + 1
                errors.append(f"{path}:{line_no}: layer `{own}` uses `crate::{name}`, a layer above it "
                              f"(order, bottom to top: {' < '.join(LAYERS)})")
    missing = [name for name in LAYERS if name not in seen]
    if missing:
        errors.append(f"{src}: layers listed in scripts/layers.py but missing: {', '.join(missing)}")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"layers: {len(errors)} import(s) against the layer order", file=sys.stderr)
        return 1
    print(f"layers: {len(LAYERS)} layers of {src}, no import upwards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
