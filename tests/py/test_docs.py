"""Tier 1 (no Envoy, no mdBook): the docs hold together.

The docs are README.md (the landing page), BENCHMARKS.md and the mdBook under docs/ (docs/src,
listed by docs/src/SUMMARY.md; `make docs` builds it). Checked here:

- every relative link and image in them resolves: the file or folder exists, and a `#anchor` names
  a heading of the target (slugs as mdBook and GitHub make them: lower case, letters, digits, `_`
  and `-` kept, spaces to `-`, the rest dropped; a repeated heading gets `-1`, `-2`, ...); every
  `{{#include FILE}}` of the book names a file;
- SUMMARY.md lists every chapter under docs/src, once, and every file it lists exists;
- every ```json block that is a policy (an object with `version` and one of `tools`, `default`,
  `policies`) passes `mcp-policy check`, the filter's own loader; a block fenced ```json,invalid is
  an example of a policy the filter refuses, and must fail it;
- README.md stays a landing page: at most 300 lines;
- the docs state where things stand, not the history of the work: no issue numbers, no numbered
  work sessions, no "stops".

The CLI is `$MCP_POLICY_CLI`, default target/release/mcp-policy (`make cli`; `make test` builds it
before this tier runs); a missing binary fails the policy test, it never skips it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest


def _repo_root() -> Path:
    for d in Path(__file__).resolve().parents:
        if (d / "Cargo.lock").is_file() and (d / "docs").is_dir():
            return d
    raise RuntimeError("repository root not found above " + __file__)


REPO = _repo_root()
BOOK_SRC = REPO / "docs" / "src"
SUMMARY = BOOK_SRC / "SUMMARY.md"
README_MAX_LINES = 300
POLICY_KEYS = ("tools", "default", "policies")
INVALID_FENCE = "json,invalid"


def doc_files() -> list[Path]:
    return [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted(BOOK_SRC.rglob("*.md"))]


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def blocks_and_prose(text: str) -> tuple[list[tuple[int, str, str]], list[tuple[int, str]]]:
    """Fenced code blocks as (line of the opening fence, info string, body), and the lines outside
    them as (line number, text). Line numbers start at 1."""
    blocks, prose = [], []
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = (m.group(2), n, m.group(3).strip(), [])
            else:
                prose.append((n, line))
        elif m and m.group(2).startswith(fence[0]) and not m.group(3).strip():
            blocks.append((fence[1], fence[2], "\n".join(fence[3])))
            fence = None
        else:
            fence[3].append(line)
    return blocks, prose


INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")


def slug(heading: str) -> str:
    """The id mdBook (and, for these headings, GitHub) gives a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "_-":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


_anchors: dict[Path, set[str]] = {}


def anchors(path: Path) -> set[str]:
    if path not in _anchors:
        seen: set[str] = set()
        _, prose = blocks_and_prose(path.read_text(encoding="utf-8"))
        for _, line in prose:
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            s, k = base, 0
            while s in seen:
                k += 1
                s = f"{base}-{k}"
            seen.add(s)
        _anchors[path] = seen
    return _anchors[path]


def links(path: Path) -> list[tuple[int, str]]:
    _, prose = blocks_and_prose(path.read_text(encoding="utf-8"))
    found = []
    for n, line in prose:
        line = INLINE_CODE.sub("", line)
        found += [(n, m.group(1)) for m in LINK.finditer(line)]
    return found


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for doc in doc_files():
        for n, target in links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path_part, _, anchor = target.partition("#")
            dest = (doc.parent / path_part).resolve() if path_part else doc
            where = f"{rel(doc)}:{n}: ({target})"
            if not dest.exists():
                broken.append(f"{where}: no such file or folder")
            elif anchor and dest.is_dir():
                broken.append(f"{where}: an anchor into a folder")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where}: no heading with that anchor in {rel(dest)}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_book_include_names_a_file():
    missing = []
    for doc in sorted(BOOK_SRC.rglob("*.md")):
        for n, line in enumerate(doc.read_text(encoding="utf-8").split("\n"), 1):
            for m in INCLUDE.finditer(line):
                if not (doc.parent / m.group(1).split(":")[0]).is_file():
                    missing.append(f"{rel(doc)}:{n}: {{{{#include {m.group(1)}}}}}: no such file")
    assert not missing, "\n".join(missing)


def test_the_summary_lists_every_chapter_once_and_only_chapters_that_exist():
    _, prose = blocks_and_prose(SUMMARY.read_text(encoding="utf-8"))
    listed = [(n, t) for n, line in prose for t in (m.group(1) for m in LINK.finditer(line))]
    assert listed, "SUMMARY.md lists no chapter"
    problems = []
    seen = set()
    for n, target in listed:
        p = (BOOK_SRC / target).resolve()
        if not p.is_file():
            problems.append(f"docs/src/SUMMARY.md:{n}: {target}: no such file")
        if p in seen:
            problems.append(f"docs/src/SUMMARY.md:{n}: {target} listed twice")
        seen.add(p)
    for chapter in sorted(BOOK_SRC.rglob("*.md")):
        if chapter != SUMMARY and chapter.resolve() not in seen:
            problems.append(f"{rel(chapter)}: a chapter SUMMARY.md does not list (mdBook would not build it)")
    assert not problems, "\n".join(problems)


def policy_blocks() -> list[tuple[str, str, bool]]:
    """(file:line, JSON text, whether it must be valid) for every policy shown in the docs."""
    found = []
    for doc in doc_files():
        blocks, _ = blocks_and_prose(doc.read_text(encoding="utf-8"))
        for n, info, body in blocks:
            where = f"{rel(doc)}:{n}"
            if info == INVALID_FENCE:
                found.append((where, body, False))
                continue
            if info != "json":
                continue
            try:
                value = json.loads(body)
            except ValueError:
                continue  # a fragment such as `"gateway": {...}`, not a whole policy
            if isinstance(value, dict) and "version" in value and any(k in value for k in POLICY_KEYS):
                found.append((where, body, True))
    return found


def cli() -> Path:
    path = Path(os.environ.get("MCP_POLICY_CLI", REPO / "target" / "release" / "mcp-policy"))
    if not path.is_file():
        pytest.fail(f"mcp-policy not built: {path} is missing (make cli, or set MCP_POLICY_CLI)", pytrace=False)
    return path


def test_every_policy_in_the_docs_passes_mcp_policy_check(tmp_path):
    blocks = policy_blocks()
    assert any(valid for _, _, valid in blocks), "no policy found in the docs: the block scan is broken"
    # A key named by variable (session_key.current_env) is checked as if set when it is not.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPF_")}
    failures = []
    for i, (where, body, valid) in enumerate(blocks):
        f = tmp_path / f"block{i}.json"
        f.write_text(body + "\n", encoding="utf-8")
        r = subprocess.run([str(cli()), "check", str(f)], capture_output=True, text=True, env=env, timeout=60)
        out = (r.stdout + r.stderr).replace(str(f), where).strip()
        if valid and r.returncode != 0:
            failures.append(f"{where}: a ```json policy block fails mcp-policy check (exit {r.returncode}):\n{out}")
        if not valid and r.returncode != 1:
            failures.append(f"{where}: a ```{INVALID_FENCE} block should fail mcp-policy check with exit 1, got "
                            f"{r.returncode}:\n{out}")
    assert not failures, "\n\n".join(failures)


def test_the_readme_is_a_landing_page():
    n = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines, at most {README_MAX_LINES}: move the rest into docs/src"


HISTORY = re.compile(
    r"\bissues? #?\d+"
    r"|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)) (?:work )?session\b"
    r"|\bsession \d+\b"
    r"|\b(?:this|that|the last|the previous|the next|at this|at that) stop\b",
    re.IGNORECASE,
)


def test_the_docs_speak_of_where_things_stand_not_of_the_work():
    hits = []
    for doc in doc_files():
        for n, line in enumerate(doc.read_text(encoding="utf-8").split("\n"), 1):
            hits += [f"{rel(doc)}:{n}: {m.group(0)!r}" for m in HISTORY.finditer(line)]
    assert not hits, "history of the work in the docs (it belongs in git):\n" + "\n".join(hits)


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The scanners themselves: a broken anchor, a policy block, a history phrase."""
    assert slug("Cluster-wide limits: the rate limit service") == "cluster-wide-limits-the-rate-limit-service"
    assert slug("Numbers in `pluginConfig`") == "numbers-in-pluginconfig"
    assert slug("tools/list filtering") == "toolslist-filtering"
    assert slug("Continuation legs (MCP 2026-07-28 `input_required`)") == "continuation-legs-mcp-2026-07-28-input_required"
    doc = tmp_path / "x.md"
    doc.write_text("# A\n\n## A\n\n[a](#a-1) `[b](#nope)`\n\n```json,invalid\n{}\n```\n", encoding="utf-8")
    assert anchors(doc) == {"a", "a-1"}
    assert links(doc) == [(5, "#a-1")]
    assert blocks_and_prose(doc.read_text(encoding="utf-8"))[0] == [(7, "json,invalid", "{}")]
    assert HISTORY.search("as measured in the fifth session") and HISTORY.search("see issue 20")
    assert not HISTORY.search("the client starts a new session; envoyproxy/gateway#9952")
