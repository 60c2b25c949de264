#!/usr/bin/env bash
# Re-copy the shared replay cases into tests/cases/, verbatim.
# Usage: tests/sync_cases.sh [SOURCE_DIR]   (default: ../shared/cases next to the repository)
# requests/ is mirrored: case files removed upstream are removed here too.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${1:-$here/../../shared/cases}"
dst="$here/cases"
[ -d "$src/requests" ] || { echo "sync_cases: no cases at $src" >&2; exit 1; }
src="$(cd "$src" && pwd)"
mkdir -p "$dst/requests"
for f in README.md policy.json control.json; do install -m 0644 "$src/$f" "$dst/$f"; done
for f in recorder.py replay.py; do install -m 0755 "$src/$f" "$dst/$f"; done
rm -f "$dst"/requests/*.json
for f in "$src"/requests/*.json; do install -m 0644 "$f" "$dst/requests/"; done
echo "sync_cases: $(ls "$dst"/requests/*.json | wc -l) cases from $src"
