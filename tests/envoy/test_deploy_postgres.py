"""Tier 2, deploy: deploy/kubernetes/postgres run for real, without Kubernetes.

The manifests' configuration is one the real binaries accept:
- the init script of the bundled PostgreSQL (ConfigMap mcp-approvals-postgres-init) runs against a
  real PostgreSQL 15 (testkit/postgres.py) as the image runs it: it creates the role mcp_approvals
  (LOGIN, not a superuser, no CREATEDB/CREATEROLE) owning the database mcp_approvals;
- the server then requires SCRAM-SHA-256 passwords (the image's default for TCP), and two
  `mcp-approvals` processes start with exactly the Deployment's arguments (addresses moved to
  127.0.0.1, the approvers' file to a temporary one) and `MCP_APPROVALS_DB` set to the URL the
  README's Secret command builds: both become healthy, the migrations ran once as mcp_approvals,
  the logged URL has no password, and an approval opened on one replica and approved on the other
  is consumed on the first (shared state);
- what the README says happens otherwise: a wrong password, `sslmode=require` (no TLS client) and
  an unreachable database each stop the process at start with code 2 (Kubernetes restarts it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from testkit import approvals as ha
from testkit import postgres
from testkit.paths import REPO_ROOT
from testkit.processes import HOST, free_port, spawn
from testkit.stack import Stack

PG_DIR = REPO_ROOT / "deploy" / "kubernetes" / "postgres"
SERVICE_HOST = "mcp-approvals-postgres.mcp-system.svc.cluster.local:5432"
APPROVER, APPROVER_TOKEN = "alice", secrets.token_hex(24)


def manifest(path: str, kind: str, name: str) -> dict:
    (doc,) = [d for d in yaml.safe_load_all((PG_DIR / path).read_text(encoding="utf-8"))
              if d and d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def readme_url_template() -> str:
    """The `url` of the README's `kubectl create secret generic mcp-approvals-db` command."""
    (url,) = re.findall(r'--from-literal=url="([^"]+)"', (PG_DIR / "README.md").read_text(encoding="utf-8"))
    return url


def url_for(pg: postgres.Postgres, password: str) -> str:
    """The README's URL with the password the Secret holds, and the Service's address replaced by
    the test server's."""
    url = readme_url_template()
    assert url.count("$PW") == 1 and url.count(SERVICE_HOST) == 1, url
    return url.replace("$PW", password).replace(SERVICE_HOST, f"{HOST}:{pg.port}")


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    """A PostgreSQL 15 prepared as the bundled StatefulSet's first start prepares it: the init
    script run, then password (SCRAM) authentication required on TCP for every role but postgres
    (the test's own superuser access)."""
    server = postgres.start_postgres(tmp_path_factory.mktemp("pg"))
    try:
        password = secrets.token_hex(24)  # README: openssl rand -hex 24
        script = manifest("postgres.yaml", "ConfigMap", "mcp-approvals-postgres-init")["data"]["10-mcp-approvals.sh"]
        path = tmp_path_factory.mktemp("init") / "10-mcp-approvals.sh"
        path.write_text(script, encoding="utf-8")
        env = {"PATH": f"{server.bindir}:{os.environ['PATH']}", "PGHOST": HOST, "PGPORT": str(server.port),
               "POSTGRES_USER": "postgres", "MCP_APPROVALS_DB_PASSWORD": password}
        done = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
        hba = server.data / "pg_hba.conf"
        hba.write_text("local all all trust\nhost all postgres 127.0.0.1/32 trust\n"
                       "host all all 127.0.0.1/32 scram-sha-256\n", encoding="utf-8")
        assert server.psql("SELECT pg_reload_conf()").strip() == "t"
        server.app_password = password  # type: ignore[attr-defined]
        yield server
    finally:
        server.stop()


def deployment_container() -> dict:
    dep = manifest("approvals-deployment.yaml", "Deployment", "mcp-approvals")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


def start_replica(stack: Stack, name: str, db_url: str, approvers_file: Path) -> ha.Approvals:
    """mcp-approvals with the Deployment's arguments and environment, on free 127.0.0.1 ports."""
    c = deployment_container()
    page, check = free_port(), free_port()
    moved = {"--listen=0.0.0.0:8095": f"--listen={HOST}:{page}",
             "--check-listen=0.0.0.0:8096": f"--check-listen={HOST}:{check}",
             "--approvers-file=/etc/mcp-approvals/approvers": f"--approvers-file={approvers_file}"}
    assert set(moved) <= set(c["args"]), c["args"]
    argv = [str(ha.approvals_binary())] + [moved.get(a, a) for a in c["args"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_APPROVALS_")}
    secret = {("mcp-approvals-db", "url"): db_url}
    for e in c["env"]:
        ref = e["valueFrom"]["secretKeyRef"]
        env[e["name"]] = secret[(ref["name"], ref["key"])]
    proc = spawn(name, argv, stack.log_dir / f"{stack._unique(name)}.log", cwd=REPO_ROOT, env=env)
    stack.procs.append(proc)

    def healthy(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/healthz", timeout=1) as r:
                return r.status == 200 and r.read() == b"ok"
        except OSError:
            return False

    proc.wait_until(lambda: healthy(page) and healthy(check), 30, "healthy")
    return ha.Approvals(proc, page, db_url, token=APPROVER_TOKEN, approver=APPROVER, check_port=check)


def check(svc: ha.Approvals, arguments: dict) -> dict:
    """One /v1/check as the filter sends it (API.md), on the replica's check port."""
    grant_id = hashlib.sha256(b"deploy-agent-token").hexdigest()
    upstream = {"cluster": "mcp_upstream", "authority": "mcp.deploy:8000", "path": "/mcp"}
    body = json.dumps({"key": ha.approval_key(grant_id, "start_vm", arguments, upstream), "grant_id": grant_id,
                       "grant": "sha256:deploy", "tool": "start_vm", "upstream": upstream, "arguments": arguments,
                       "request_id": "req-deploy", "expires_in_seconds": 600, "wait_seconds": 0,
                       "reason": "starting a VM costs money"}).encode()
    req = urllib.request.Request(f"http://{HOST}:{svc.check_port}/v1/check", data=body, method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read())


def test_init_script_creates_a_login_role_owning_its_database(pg):
    roles = pg.psql("SELECT rolname, rolsuper, rolcreatedb, rolcreaterole, rolcanlogin FROM pg_roles "
                    "WHERE rolname = 'mcp_approvals'")
    assert roles.strip() == "mcp_approvals|f|f|f|t"
    assert pg.psql("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'mcp_approvals'").strip() \
        == "mcp_approvals"
    # Stored as a SCRAM verifier, never as text.
    assert pg.psql("SELECT left(rolpassword, 14) FROM pg_authid WHERE rolname = 'mcp_approvals'").strip() \
        == "SCRAM-SHA-256$"


def test_two_replicas_with_the_manifest_configuration_share_one_database(stack, pg, tmp_path):
    approvers = tmp_path / "approvers"
    approvers.write_text(f"# from the Secret mcp-approvals-approvers\n{APPROVER}={APPROVER_TOKEN}\n", encoding="utf-8")
    url = url_for(pg, pg.app_password)
    assert url == f"postgres://mcp_approvals:{pg.app_password}@{HOST}:{pg.port}/mcp_approvals"
    replicas = int(manifest("approvals-deployment.yaml", "Deployment", "mcp-approvals")["spec"]["replicas"])
    assert replicas == 2
    a, b = [start_replica(stack, f"approvals-{i}", url, approvers) for i in range(replicas)]
    # The migrations ran once, as the role (not a superuser), in its own database.
    assert pg.psql("SELECT version FROM mcp_approvals_migrations ORDER BY version", db="mcp_approvals").split() == ["2", "3", "4", "5", "6"]
    owners = pg.psql("SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
                     db="mcp_approvals").split()
    assert owners == ["approvals|mcp_approvals", "mcp_approvals_migrations|mcp_approvals", "sessions|mcp_approvals"]
    # Shared state: opened on one replica, approved through the other's API, consumed on the first.
    args = {"node": "pve1", "vmid": 101}
    opened = check(a, args)
    assert opened["status"] == "pending", opened
    assert b.approve(opened["approval_id"], "ok")["state"] == "approved"
    used = check(a, args)
    assert (used["status"], used["approval_id"]) == ("approved", opened["approval_id"])
    assert [x["id"] for x in b.listing("consumed")] == [opened["approval_id"]]
    # The logged URL names user, host and database, never the password.
    for svc in (a, b):
        log = svc.proc.log_path.read_text(encoding="utf-8", errors="replace")
        assert f"db=postgres://mcp_approvals@{HOST}:{pg.port}/mcp_approvals" in log, log[-2000:]
        assert pg.app_password not in log


@pytest.mark.parametrize("case", ["wrong password", "sslmode=require", "unreachable"])
def test_a_database_it_cannot_use_stops_the_replica_at_start(stack, pg, tmp_path, case):
    """Exit code 2 within seconds, with the reason, and no password in the output: Kubernetes then
    restarts the pod with backoff (README: the first install restarts until PostgreSQL is ready)."""
    approvers = tmp_path / "approvers"
    approvers.write_text(f"{APPROVER}={APPROVER_TOKEN}\n", encoding="utf-8")
    wrong = secrets.token_hex(24)
    url = {"wrong password": url_for(pg, wrong),
           "sslmode=require": url_for(pg, pg.app_password) + "?sslmode=require",
           "unreachable": url_for(pg, pg.app_password).replace(f":{pg.port}/", f":{free_port()}/")}[case]
    c = deployment_container()
    argv = [str(ha.approvals_binary())] + [
        a.replace("0.0.0.0:8095", f"{HOST}:{free_port()}")
         .replace("0.0.0.0:8096", f"{HOST}:{free_port()}")
         .replace("/etc/mcp-approvals/approvers", str(approvers)) for a in c["args"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_APPROVALS_")}
    env["MCP_APPROVALS_DB"] = url
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "mcp-approvals: --db postgres://mcp_approvals@" in out, out
    assert pg.app_password not in out and wrong not in out
    reason = {"wrong password": 'password authentication failed for user "mcp_approvals"',
              "sslmode=require": "error performing TLS handshake", "unreachable": "Connection refused"}[case]
    assert reason in out, out
