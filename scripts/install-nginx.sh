#!/usr/bin/env bash
# Install Debian's nginx for the test of `acp-journal serve` behind a reverse proxy
# (tests/it/serve.rs, docs/nginx-acp.conf), unless it is already there. The tests run their own
# nginx (a foreground process with a private prefix and config); the package's service is neither
# started nor left running. Idempotent: a no-op taking milliseconds when /usr/sbin/nginx exists.
set -euo pipefail

if [[ -x /usr/sbin/nginx ]]; then
    exit 0
fi
echo "[nginx] installing Debian nginx-light (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
# No service started by the package's scripts (there may be no init system at all): a
# policy-rc.d that denies every start, unless the machine already has one of its own.
POLICY=/usr/sbin/policy-rc.d
if [[ ! -e "$POLICY" ]]; then
    printf '#!/bin/sh\nexit 101\n' > "$POLICY"
    chmod +x "$POLICY"
    trap 'rm -f "$POLICY"' EXIT
fi
apt_install() { apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
# nginx-light (bookworm) is enough; later releases have only nginx. The package lists may be
# missing on a fresh machine: refresh them only when the install fails.
if ! apt_install nginx-light 2>/dev/null; then
    apt-get update -qq
    apt_install nginx-light 2>/dev/null || apt_install nginx
fi
test -x /usr/sbin/nginx
# Had the machine's own policy let the package start its service, stop it: it would hold port 80.
if [[ -s /run/nginx.pid ]] && kill -0 "$(cat /run/nginx.pid)" 2>/dev/null; then
    echo "[nginx] stopping the nginx service the package started" >&2
    /usr/sbin/nginx -s quit || true
fi
