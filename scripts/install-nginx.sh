#!/usr/bin/env bash
# Install Debian's nginx for the test of `acp-journal serve` behind a reverse proxy
# (tests/it/serve.rs, docs/nginx-acp.conf), unless it is already there. The tests run their own
# nginx (a foreground process with a private prefix); the package's service is not started.
# Idempotent: a no-op taking milliseconds when /usr/sbin/nginx exists.
set -euo pipefail

if [[ -x /usr/sbin/nginx ]]; then
    exit 0
fi
echo "[nginx] installing Debian nginx-light (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
# No service started by the package's scripts (there may be no init system at all).
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
if ! apt-get install -y -qq --no-install-recommends nginx-light >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nginx-light >/dev/null 2>&1 ||
        apt-get install -y -qq --no-install-recommends nginx >/dev/null
fi
test -x /usr/sbin/nginx
