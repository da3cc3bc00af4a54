#!/usr/bin/env bash
# One set-up command for a fresh machine (`npm run setup`): Redis >= 7 (redis-server + redis-cli,
# which the tests start themselves on ports 7100-7479), openssl (the TLS tests make their own
# certificates) and Chromium (the lock board's browser test drives it headless through
# playwright-core, never a downloaded browser build), then the npm dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUIRED_MAJOR=7

redis_major() { redis-server --version 2>/dev/null | sed -n 's/.* v=\([0-9][0-9]*\)\..*/\1/p'; }

redis_ok() {
  command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 &&
    [ "$(redis_major)" -ge "$REQUIRED_MAJOR" ] 2>/dev/null
}

tools_ok() { redis_ok && command -v openssl >/dev/null 2>&1; }

# Where test/board/board-browser.spec.ts looks for Chromium.
chromium_path() { echo "${CHROMIUM_PATH:-/usr/bin/chromium}"; }
chromium_ok() { [ -x "$(chromium_path)" ]; }

install_redis_with_apt() {
  echo "Installing redis-server and redis-tools with apt-get..."
  # The package's post-install would start its own service on 6379. The tests never use it, and
  # starting it could clash with a Redis already on 6379, so keep dpkg from starting any service
  # during this install (policy-rc.d 101 = "not allowed"), unless the machine already has a policy.
  local policy=/usr/sbin/policy-rc.d added=no
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    added=yes
    trap "rm -f $policy" EXIT # also on failure
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools openssl
  if [ "$added" = yes ]; then
    rm -f "$policy"
    trap - EXIT
  fi
}

if ! tools_ok; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    install_redis_with_apt
  else
    cat >&2 <<MSG
Redis >= ${REQUIRED_MAJOR} (redis-server and redis-cli on PATH) and openssl are required; found: $(redis-server --version 2>/dev/null || echo "no redis-server"), $(openssl version 2>/dev/null || echo "no openssl").
Install them, then run "npm run setup" again:
  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y redis-server redis-tools openssl
  macOS:         brew install redis openssl
  other:         https://redis.io/docs/latest/operate/oss_and_stack/install/
The tests start their own redis-server processes; no Redis service needs to run.
MSG
    exit 1
  fi
  if ! redis_ok; then
    echo "The installed Redis is older than ${REQUIRED_MAJOR}: $(redis-server --version). Install Redis >= ${REQUIRED_MAJOR} (e.g. from packages.redis.io)." >&2
    exit 1
  fi
fi

if ! chromium_ok; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing chromium with apt-get..."
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  else
    cat >&2 <<MSG
Chromium is required by the lock board's browser test (test/board/board-browser.spec.ts); found none at $(chromium_path).
Install it, or point CHROMIUM_PATH at a Chromium or Chrome binary, then run "npm run setup" again:
  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y chromium
  macOS:         brew install --cask chromium, then CHROMIUM_PATH=/Applications/Chromium.app/Contents/MacOS/Chromium
Without it, that test file is skipped and says why; the rest of the suite runs.
MSG
    exit 1
  fi
  if ! chromium_ok; then
    echo "apt-get installed chromium, but $(chromium_path) is not there: set CHROMIUM_PATH to its binary." >&2
    exit 1
  fi
fi

npm ci

echo
echo "node:         $(node --version)"
echo "npm:          $(npm --version)"
echo "redis-server: $(redis-server --version)"
echo "redis-cli:    $(redis-cli --version)"
echo "openssl:      $(openssl version)"
echo "chromium:     $("$(chromium_path)" --version 2>/dev/null | head -1)"
