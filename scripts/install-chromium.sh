#!/usr/bin/env bash
# Install Debian's chromium for the HTML export's browser test (tests/it/html.rs), unless it is
# already there. Idempotent: a no-op taking milliseconds when /usr/bin/chromium exists.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then
    exit 0
fi
echo "[chromium] installing Debian chromium (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing on a fresh machine; refresh them only when the install fails.
if ! apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
test -x /usr/bin/chromium
