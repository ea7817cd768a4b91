#!/usr/bin/env bash
# Installs the system packages nekro needs, only those that are missing:
# bubblewrap (the sandbox) and Debian's python3 (the sandbox's
# interpreter) and e2fsprogs (volumes). With "test", also chromium (the web UI's browser test)
# and the PostgreSQL server the KV conformance suite runs on (docker.io
# comes with .ci/docker.sh).
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -x /usr/bin/python3 ] || need+=(python3)
# Chat and plugin directories become ext4 volumes when nekro runs as root.
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /sbin/mkfs.ext4 ] || need+=(e2fsprogs)
# The data-science stack the AI's code expects in the sandbox (Debian's
# builds: the sandbox sees the host's /usr); the prompt lists what is found.
for pkg in numpy:python3-numpy matplotlib:python3-matplotlib PIL:python3-pil pandas:python3-pandas; do
  /usr/bin/python3 -c "import ${pkg%%:*}" >/dev/null 2>&1 || need+=("${pkg#*:}")
done
if [ "${1:-}" = test ]; then
  command -v pg_createcluster >/dev/null 2>&1 || need+=(postgresql postgresql-contrib)
  command -v pgrep >/dev/null 2>&1 || need+=(procps)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)         # the SSRF test's network namespace
  command -v chromium >/dev/null 2>&1 || need+=(chromium)   # the web UI's browser test
  # The plugin documents' Python examples use pydantic and aiofiles.
  /usr/bin/python3 -c 'import pydantic' >/dev/null 2>&1 || need+=(python3-pydantic)
  /usr/bin/python3 -c 'import aiofiles' >/dev/null 2>&1 || need+=(python3-aiofiles)
  # ... and requests (dynamic_import_pkg("requests>=2.25.0") in the downloads).
  /usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || need+=(python3-requests)
  /usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)   # plugins' requirements, dynamic_import_pkg
  command -v git >/dev/null 2>&1 || need+=(git)   # nekro plugins install from a git repository
  # The Python plugin host's tests make httpx requests from plugin methods
  # (inside an asyncio Task, as real Nekro Agent plugins do).
  /usr/bin/python3 -c 'import httpx' >/dev/null 2>&1 || need+=(python3-httpx)
  # Python plugins' web routers (mount_router) are FastAPI APIRouters.
  /usr/bin/python3 -c 'import fastapi' >/dev/null 2>&1 || need+=(python3-fastapi)
  # The MCP tests run the reference MCP servers and the conformance suite (npm).
  command -v node >/dev/null 2>&1 || need+=(nodejs)
  command -v npm >/dev/null 2>&1 || need+=(npm)
fi
if [ ${#need[@]} -gt 0 ]; then

echo "nekro: installing missing system packages: ${need[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "nekro: need root (or sudo) to install ${need[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The npm packages of internal/mcp's tests, at the versions of its
# package-lock.json, into .cache/npm (gitignored); again only when the lock
# file changed.
if [ "${1:-}" = test ]; then
  repo="$(cd "$(dirname "$0")/.." && pwd)"
  src="$repo/internal/mcp/testdata/npm" dst="$repo/.cache/npm"
  if ! cmp -s "$src/package-lock.json" "$dst/package-lock.json" || [ ! -d "$dst/node_modules" ]; then
    echo "nekro: installing the MCP tests' npm packages into .cache/npm" >&2
    mkdir -p "$dst"
    cp "$src/package.json" "$src/package-lock.json" "$dst/"
    (cd "$dst" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
fi
