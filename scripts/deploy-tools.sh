#!/usr/bin/env bash
# Installs the Debian tools of the deploy tests when missing: umoci (make oci), skopeo (push and
# pull) and docker-registry (a local OCI registry the tests start on a free 127.0.0.1 port).
# Needs root and apt-get; otherwise says what to install. docker-registry's package would start a
# registry on :5000 at install time: a temporary /usr/sbin/policy-rc.d (exit 101) prevents that
# when the machine has none.
set -euo pipefail
missing=()
for p in umoci skopeo docker-registry; do command -v "$p" >/dev/null || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "deploy tools missing: ${missing[*]} (sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
cleanup=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
  cleanup=/usr/sbin/policy-rc.d
fi
trap '[ -z "$cleanup" ] || rm -f "$cleanup"' EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
