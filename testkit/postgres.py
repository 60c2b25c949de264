"""A throwaway PostgreSQL server for the tests: Debian's `postgresql` binaries, a fresh cluster in a
temporary directory, listening on a free port on 127.0.0.1 only, trust authentication, no fsync.

PostgreSQL refuses to run as root: as root the cluster belongs to the `postgres` user and every
server command runs through `runuser -u postgres --`. The Makefile installs the package when it is
missing (and run as root).

- `start_postgres(log_dir)` -> `Postgres` (`url(db)`, `create_database()`, `stop()`).
- As a script: `python -m testkit.postgres run -- CMD ARGS...` runs CMD with `MCP_APPROVALS_TEST_PG` set
  to the server's URL (the Rust service suite reads it), then stops the server; exits with CMD's
  status.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from testkit.processes import HOST, ProcessFailed, free_port, port_open


def pg_bindir() -> Path:
    """`$PG_BINDIR`, else the newest /usr/lib/postgresql/N/bin holding initdb."""
    env = os.environ.get("PG_BINDIR")
    if env:
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise ProcessFailed("PostgreSQL is not installed (make test installs Debian's postgresql as root)")
    return Path(found[-1]).parent


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass
class Postgres:
    port: int
    data: Path
    bindir: Path

    def url(self, db: str = "postgres") -> str:
        return f"postgres://postgres@{HOST}:{self.port}/{db}"

    def psql(self, sql: str, db: str = "postgres") -> str:
        out = subprocess.run([str(self.bindir / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.url(db),
                              "-c", sql], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise ProcessFailed(f"psql {sql!r}: {out.stderr}")
        return out.stdout

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(_as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                                  "stop"]), capture_output=True, timeout=60)
        shutil.rmtree(self.data.parent, ignore_errors=True)


def start_postgres(log_dir: Path | None = None, max_connections: int = 300) -> Postgres:
    bindir = pg_bindir()
    root = Path(tempfile.mkdtemp(prefix="mcp-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    os.chmod(root, 0o700)
    log = (log_dir or root) / "postgres.log"
    init = subprocess.run(_as_owner([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                     "-E", "UTF8", "--locale=C", "--no-sync"]),
                          capture_output=True, text=True, timeout=120)
    if init.returncode != 0:
        raise ProcessFailed(f"initdb: {init.stderr}")
    port = free_port()
    opts = (f"-p {port} -k {root} -c listen_addresses={HOST} -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c max_connections={max_connections}")
    if os.geteuid() == 0 and log_dir is not None:
        log = root / "postgres.log"  # the postgres user may not write into the log dir
    start = subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w",
                                      "-t", "60", "start"]), capture_output=True, text=True, timeout=90)
    if start.returncode != 0:
        text = log.read_text(errors="replace") if log.exists() else ""
        raise ProcessFailed(f"pg_ctl start: {start.stderr}\n{text[-2000:]}")
    pg = Postgres(port, data, bindir)
    deadline = time.monotonic() + 30
    while not port_open(port):
        if time.monotonic() > deadline:
            pg.stop()
            raise ProcessFailed("PostgreSQL did not listen")
        time.sleep(0.05)
    return pg


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "run" or argv[1] != "--":
        print("usage: python -m testkit.postgres run -- CMD ARGS...", file=sys.stderr)
        return 2
    pg = start_postgres()
    try:
        env = dict(os.environ, MCP_APPROVALS_TEST_PG=pg.url())
        return subprocess.call(argv[2:], env=env)
    finally:
        pg.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
