#!/usr/bin/env python3
"""The client side of `make run-oauth`: the official MCP Python SDK's OAuth client
(`mcp.client.auth.OAuthClientProvider`) against http://127.0.0.1:10000/mcp.

The SDK gets 401 with `WWW-Authenticate: Bearer resource_metadata=...`, reads the protected resource
metadata, the authorization server's metadata, registers itself (RFC 7591), and runs the code flow with
PKCE. The user's part, login and consent at the authorization server, is either automated (--login
NAME: oidc-provider's development pages, answered over HTTP as the tests do) or yours (--browser:
open the printed URL, log in with any name and password, consent; the redirect comes back to
http://127.0.0.1:8765/callback).

Then, as that identity: tools/list, list_vms, and vm_agent_exec 11 times: the policy allows 10 a
minute per grant, and the grant is the verified `sub`, so a second run with the same login shares the
count and another login has its own.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer

import anyio
import httpx2
import jwt
from mcp import MCPError
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from testkit import oauth as ho

EXEC = {"node": "pve1", "vmid": 100, "command": "uptime"}


def browser_callback(port: int) -> tuple[str, threading.Event, dict]:
    """A one-shot HTTP server on 127.0.0.1:`port` that keeps the redirect URL it receives."""
    got: dict = {}
    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            got["redirect"] = f"http://127.0.0.1:{port}{self.path}"
            body = b"Authorization received; you can close this tab.\n"
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            done.set()

    server = HTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.handle_request, daemon=True).start()
    return f"http://127.0.0.1:{port}/callback", done, got


async def main(args: argparse.Namespace) -> int:
    storage = ho.MemoryStorage()
    if args.browser:
        redirect_uri, done, got = browser_callback(args.callback_port)
    else:
        redirect_uri, done, got = f"http://127.0.0.1:{args.callback_port}/callback", threading.Event(), {}

    async def redirect_handler(url: str) -> None:
        if args.browser:
            print(f"Open this URL, log in (any name, any password) and consent:\n  {url}\n", flush=True)
            webbrowser.open(url)
        else:
            got["redirect"] = (await ho.automated_consent(url, redirect_uri, login=args.login)).redirect
            done.set()

    async def callback_handler():
        await anyio.to_thread.run_sync(done.wait)
        return ho.code_result(got["redirect"])

    provider = OAuthClientProvider(server_url=args.url, client_metadata=ho.client_metadata(redirect_uri),
                                   storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(10.0, read=300.0)) as http:
        async with streamable_http_client(args.url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
                grant = "sha256:" + hashlib.sha256(claims["sub"].encode()).hexdigest()[:12]
                print(f"registered client {storage.client_info.client_id}; token for sub={claims['sub']!r}, "
                      f"aud={claims['aud']!r}; the filter's grant label: {grant}")
                tools = await session.list_tools()
                print(f"tools/list: {', '.join(sorted(t.name for t in tools.tools))}")
                listed = await session.call_tool("list_vms", {})
                print(f"list_vms: {'error' if listed.is_error else 'ok'}")
                for i in range(1, 12):
                    try:
                        await session.call_tool("vm_agent_exec", EXEC)
                        print(f"vm_agent_exec #{i}: allowed")
                    except MCPError as e:
                        print(f"vm_agent_exec #{i}: refused: {e.error.message}")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:10000/mcp", help="the MCP endpoint behind Envoy")
    who = ap.add_mutually_exclusive_group()
    who.add_argument("--login", default="alice", help="automated login and consent as this user (default alice)")
    who.add_argument("--browser", action="store_true", help="log in and consent yourself, in a browser")
    ap.add_argument("--callback-port", type=int, default=8765, help="port of the redirect URI on 127.0.0.1")
    sys.exit(anyio.run(main, ap.parse_args()))
