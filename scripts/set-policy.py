#!/usr/bin/env python3
"""Render a policy.json into the ECDS resource file that envoy/envoy-ecds.yaml watches, atomically.

Usage: set-policy.py POLICY.json ECDS_FILE [--wasm PATH] [--vm-id ID]

Envoy reloads a path-based config source only when the file is replaced by a rename, so the new
content is written to a temporary file in the same directory and moved over ECDS_FILE. The policy is
not validated here (Envoy's filter does that, and keeps the old policy if the new one is rejected);
run `mcp-policy check POLICY.json` first to catch errors before they reach Envoy.
Keep --vm-id unchanged across reloads: rate counters live in that vm_id's shared data.
"""
import argparse
import json
import os
import sys
import tempfile


def resource(policy_text: str, wasm: str, vm_id: str) -> dict:
    return {
        "resources": [{
            "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
            "name": "mcp_policy",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
                "config": {
                    "name": "mcp_policy",
                    "root_id": "mcp_policy",
                    "failure_policy": "FAIL_RELOAD",
                    "vm_config": {
                        "vm_id": vm_id,
                        "runtime": "envoy.wasm.runtime.v8",
                        "code": {"local": {"filename": wasm}},
                    },
                    "configuration": {
                        "@type": "type.googleapis.com/google.protobuf.StringValue",
                        "value": policy_text,
                    },
                },
            },
        }]
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("policy")
    ap.add_argument("ecds_file")
    ap.add_argument("--wasm", default="target/wasm32-wasip1/release/mcp_policy_filter.wasm")
    ap.add_argument("--vm-id", default="mcp_policy")
    a = ap.parse_args()
    with open(a.policy, encoding="utf-8") as fh:
        text = fh.read()
    target_dir = os.path.dirname(os.path.abspath(a.ecds_file))
    fd, tmp = tempfile.mkstemp(prefix=".mcp_policy.", suffix=".yaml", dir=target_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        # JSON is valid YAML; Envoy reads either.
        json.dump(resource(text, a.wasm, a.vm_id), fh, indent=2)
    os.replace(tmp, a.ecds_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
