#!/usr/bin/env bash
# Install the browser tests' browser and its driver, unless they are already there:
#   - Debian's chromium (/usr/bin/chromium): the HTML export's test (tests/it/html.rs) and the
#     page's (tests/it/page.rs);
#   - puppeteer-core, pinned, into <peers>/browser/ (PEERS_DIR, default <repo>/.peers): the page's
#     test drives chromium with it (tests/agents/page_driver.mjs). puppeteer-core downloads no
#     browser of its own.
# Idempotent: a no-op taking milliseconds when both are installed (a stamp records the pin).
set -euo pipefail

PUPPETEER_VER=24.43.1

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="${PEERS_DIR:-$ROOT/.peers}"
BROWSER="$PEERS/browser"
STAMP="$BROWSER/.stamp"
WANT="puppeteer-core@$PUPPETEER_VER"

if [[ ! -x /usr/bin/chromium ]]; then
    echo "[chromium] installing Debian chromium (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    # The package lists may be missing on a fresh machine; refresh them only when the install
    # fails.
    if ! apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends chromium >/dev/null
    fi
    test -x /usr/bin/chromium
fi

installed() {
    [[ "$(node -p "require('$BROWSER/node_modules/puppeteer-core/package.json').version" 2>/dev/null || true)" == "$PUPPETEER_VER" ]]
}
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] && installed; then
    exit 0
fi
command -v npm >/dev/null || { echo "[chromium] npm not found" >&2; exit 1; }
echo "[chromium] npm install --prefix $BROWSER $WANT" >&2
mkdir -p "$BROWSER"
rm -f "$STAMP"
# PUPPETEER_SKIP_DOWNLOAD: belt and braces (puppeteer-core has no install step that downloads).
PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$BROWSER" --no-audit --no-fund --save-exact \
    --loglevel=error "$WANT" >&2
installed || { echo "[chromium] puppeteer-core $PUPPETEER_VER missing after npm install" >&2; exit 1; }
printf '%s\n' "$WANT" > "$STAMP"
