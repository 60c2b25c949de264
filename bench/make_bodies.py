#!/usr/bin/env python3
"""Write the request bodies shared by the micro benchmarks (crates/core/benches/core.rs, include_bytes!) and the
load benchmark (bench/load.py): MCP tools/call requests of an exact size.

The arguments are shaped like a real agent call (nested objects, an array of small records, numbers,
booleans, an escaped string) rather than one long string, so the JSON parser does representative work.
Run again only to change the bodies; the files are committed.
"""
import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parent / "bodies"


def call(tool: str, size: int, call_id: int = 1, args: dict | None = None) -> bytes:
    if args is None:
        args = {"node": "pve", "vmid": 100, "filter": {"status": "running", "tags": ["prod", "web"], "pool": None}}
    items = []
    base = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {"name": tool, "arguments": args}}

    def render(note: str) -> bytes:
        args["items"] = items
        args["note"] = note
        return json.dumps(base, separators=(",", ":"), ensure_ascii=False).encode()

    i = 0
    while len(render("")) < size - 120:
        items.append({"k": f"key-{i}", "v": i * 37 % 1000, "ok": i % 3 == 0, "w": 1.5 + i})
        i += 1
    if not items:
        args.pop("filter", None)
    # Pad with a string that contains escapes, to the exact size.
    pad = 'line "quoted" \\ tab\t; '
    note = ""
    while len(render(note)) < size:
        note += pad
    while len(render(note)) > size:
        note = note[:-1]
        while note.endswith("\\"):  # never leave a dangling escape
            note = note[:-1]
    body = render(note)
    while len(body) < size:  # fill what trimming an escape took
        note += "x"
        body = render(note)
    assert len(body) == size, (tool, size, len(body))
    json.loads(body)
    return body


WORDS = ("list show create update delete start stop snapshot restore migrate clone resize backup attach detach "
         "virtual machine container node storage network disk volume firewall rule user token pool").split()


def tools_list(n: int, list_id: int = 2) -> bytes:
    """A tools/list result with n tools shaped like a big MCP server's (name, title, description,
    inputSchema with a few typed properties, annotations)."""
    tools = []
    for i in range(n):
        a, b = WORDS[i % 15], WORDS[15 + (i * 7) % (len(WORDS) - 15)]
        name = f"{a}_{b}_{i}"
        props = {"node": {"type": "string", "description": "Proxmox node name"}}
        for j in range(i % 4):
            props[f"{WORDS[(i + j) % len(WORDS)]}_{j}"] = {"type": ["integer", "string", "boolean"][j % 3],
                                                           "description": f"{WORDS[j]} parameter {j} of {name}"}
        tools.append({
            "name": name,
            "title": f"{a.title()} {b}",
            "description": f"{a.title()} a {b} on a Proxmox VE node. Returns the {b} as JSON; "
                           f"fails if the node is offline.",
            "inputSchema": {"type": "object", "properties": props, "required": ["node"]},
            "annotations": {"readOnlyHint": a in ("list", "show"), "destructiveHint": a == "delete"},
        })
    msg = {"jsonrpc": "2.0", "id": list_id, "result": {"tools": tools}}
    return json.dumps(msg, separators=(",", ":")).encode()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    files = {
        "allowed-200.json": call("list_vms", 200),
        "allowed-1k.json": call("list_vms", 1024),
        "allowed-64k.json": call("list_vms", 65536),
        "denied-1k.json": call("delete_vm", 1024),
        # For the 5-condition policy (bench/policy-conditions-bench.json): every condition holds.
        "exec-1k.json": call("vm_agent_exec", 1024, args={"node": "pve", "vmid": 100, "user": "ops",
                                                           "timeout_s": 60, "command": "uptime && df -h /var"}),
        "tools-list-286.json": tools_list(286),
    }
    files["tools-list-286.sse"] = b"event: message\ndata: " + files["tools-list-286.json"] + b"\n\n"
    for name, body in files.items():
        (OUT / name).write_bytes(body)
        print(f"{name}: {len(body)} bytes")


if __name__ == "__main__":
    main()
