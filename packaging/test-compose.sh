#!/usr/bin/env bash
# Runs the deployment files for real where no image can be pulled:
# packaging/compose.yaml's nekro service (the image built as
# packaging/test-image.sh builds it, the compose file unmodified, its
# volume, published port and privileges), then packaging/nekro.service
# under systemd as PID 1 of a container. It checks /healthz, that
# `nekro doctor` passes inside with volumes and a uid per chat, that
# ws://nekro:8021/onebot/v11/ws answers on the compose network (what
# NapCat dials), a sandboxed run, and a clean `systemctl stop`. NapCat and
# PostgreSQL are not run: their images cannot be pulled here. It takes
# minutes and downloads Debian packages, so it is not part of `make test`:
#
#   packaging/test-compose.sh
#
# It needs root, dockerd, debootstrap and docker-compose (or the compose
# plugin); it starts a private engine (own socket and data under a temp
# dir, no bridge, no iptables) and removes everything on exit.
#
# Where this machine's own root lacks a capability that --privileged
# grants (CAP_SYS_RESOURCE in some containers), runc refuses every
# privileged container; the private engine then runs containers through a
# wrapper of runc that drops that one capability, so the compose file
# still runs as written. This is a property of the test machine, not of
# the deployment.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

dir=$(mktemp -d /tmp/nekro-compose-XXXXXX)
sock="$dir/docker.sock"
export DOCKER_HOST="unix://$sock"
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
cleanup() {
  set +e
  if [ -d "$dir/proj" ]; then (cd "$dir/proj" && "${compose[@]}" -f packaging/compose.yaml down -v >/dev/null 2>&1); fi
  docker rm -f nekro-systemd-test >/dev/null 2>&1
  if [ -f "$dir/dockerd.pid" ]; then
    pid=$(cat "$dir/dockerd.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  grep -o "$dir/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "test-compose: $*" >&2; exit 1; }

command -v "${compose[0]}" >/dev/null || fail "install docker-compose (apt-get install docker-compose)"
runtime=""
capbnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
if (( (16#$capbnd >> 24 & 1) == 0 )); then # CAP_SYS_RESOURCE
  runtime="$dir/runc-without-sys-resource"
  cat >"$runtime" <<'EOF'
#!/bin/sh
# runc, with CAP_SYS_RESOURCE dropped from the container's (or exec's)
# capabilities: this machine's root lacks it and cannot grant it.
prev=""; for a in "$@"; do
  case "$prev" in --bundle|-b) f="$a/config.json"; k=process;; --process|-p) f="$a"; k=;; *) f=;; esac
  [ -n "$f" ] && [ -f "$f" ] && python3 - "$f" "$k" <<'PY'
import json, sys
path, key = sys.argv[1], sys.argv[2]
c = json.load(open(path))
caps = (c.get(key, {}) if key else c).get("capabilities", {})
for k, v in caps.items():
    if isinstance(v, list):
        caps[k] = [x for x in v if x != "CAP_SYS_RESOURCE"]
json.dump(c, open(path, "w"))
PY
  prev="$a"
done
exec runc "$@"
EOF
  chmod +x "$runtime"
  echo "{\"runtimes\": {\"test\": {\"path\": \"$runtime\"}}, \"default-runtime\": \"test\"}" >"$dir/daemon.json"
  echo "test-compose: this machine's root lacks CAP_SYS_RESOURCE: containers run through $runtime" >&2
else
  echo "{}" >"$dir/daemon.json"
fi
dockerd --config-file "$dir/daemon.json" --iptables=false --ip6tables=false --bridge=none \
  --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" -H "$DOCKER_HOST" >"$dir/dockerd.log" 2>&1 &
for _ in $(seq 1 100); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
docker version >/dev/null 2>&1 || { tail -20 "$dir/dockerd.log" >&2; fail "dockerd did not start"; }

CGO_ENABLED=0 make build
packaging/debootstrap-base.sh nekro-base:local
docker build --network host --build-arg BASE=nekro-base:local -f packaging/Dockerfile -t nekro:local -t nekro:latest .

# The compose file as written, with an env file as the docs make it.
mkdir -p "$dir/proj/packaging"
cp packaging/compose.yaml "$dir/proj/packaging/"
cat >"$dir/proj/packaging/nekro.env" <<'EOF'
NEKRO_API_TOKEN=compose-test-token-0123456789
NEKRO_ONEBOT_TOKEN=compose-onebot-token-0123456789
EOF
chmod 600 "$dir/proj/packaging/nekro.env"
cd "$dir/proj"
"${compose[@]}" -f packaging/compose.yaml up -d --no-build nekro
ok=""
for _ in $(seq 1 60); do
  if curl -sf -m 2 http://127.0.0.1:8021/healthz >/dev/null; then ok=1; break; fi
  sleep 1
done
[ -n "$ok" ] || { "${compose[@]}" -f packaging/compose.yaml logs nekro >&2; fail "/healthz never answered ok on 127.0.0.1:8021"; }
echo "test-compose: compose's nekro answers /healthz on 127.0.0.1:8021" >&2
out=$("${compose[@]}" -f packaging/compose.yaml exec -T nekro nekro doctor 2>&1) || { echo "$out" >&2; fail "nekro doctor failed in compose's nekro"; }
echo "$out"
grep -q '^ok   bounded directories' <<<"$out" || fail "volumes are off in compose's nekro"
grep -q '^ok   a uid per chat' <<<"$out" || fail "chats share a uid in compose's nekro"
run=$(curl -s -m 30 -H "Authorization: Bearer compose-test-token-0123456789" -X POST \
  -d '{"code": "import numpy; print(numpy.arange(4).sum())"}' http://127.0.0.1:8021/api/chats/demo/exec)
grep -q '"output": "6\\n"' <<<"$run" || fail "a sandboxed run in compose's nekro: $run"
cat >"$dir/probe.py" <<'EOF'
import json, socket, time, urllib.request
s = socket.create_connection(("nekro", 8021), timeout=5)
s.sendall(b"GET /onebot/v11/ws HTTP/1.1\r\nHost: nekro:8021\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
          b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          b"Authorization: Bearer compose-onebot-token-0123456789\r\nX-Self-Id: 4242\r\nX-Client-Role: Universal\r\n\r\n")
assert s.recv(200).startswith(b"HTTP/1.1 101"), "the reverse WebSocket was refused"
time.sleep(1)
req = urllib.request.Request("http://nekro:8021/api/status", headers={"Authorization": "Bearer compose-test-token-0123456789"})
assert any(a["connected"] and a["self_id"] == "4242" for a in json.load(urllib.request.urlopen(req))["adapters"]), "not connected"
print("ws://nekro:8021/onebot/v11/ws: connected")
EOF
network=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$("${compose[@]}" -f packaging/compose.yaml ps -q nekro)")
docker run --rm --network "$network" -v "$dir/probe.py:/probe.py:ro" --entrypoint python3 nekro:local /probe.py
"${compose[@]}" -f packaging/compose.yaml down -v

# The systemd unit, under systemd as PID 1 of a container of the same
# image.
mkdir -p "$dir/systemd"
cp "$repo/packaging/nekro.service" "$dir/systemd/"
cat >"$dir/systemd/Dockerfile" <<'EOF'
FROM nekro:local
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd systemd-sysv curl \
 && rm -rf /var/lib/apt/lists/*
COPY nekro.service /etc/systemd/system/nekro.service
RUN install -d -m 0700 /etc/nekro && echo NEKRO_API_TOKEN=systemd-test-token-0123456789 > /etc/nekro/nekro.env \
 && chmod 600 /etc/nekro/nekro.env && systemctl enable nekro
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/lib/systemd/systemd"]
CMD []
EOF
docker build --network host -t nekro-systemd:test "$dir/systemd"
docker run -d --name nekro-systemd-test --privileged --cgroupns=private --tmpfs /run --tmpfs /run/lock nekro-systemd:test >/dev/null
ok=""
for _ in $(seq 1 60); do
  if docker exec nekro-systemd-test curl -sf -m 2 http://127.0.0.1:8021/healthz >/dev/null 2>&1; then ok=1; break; fi
  sleep 1
done
[ -n "$ok" ] || { docker exec nekro-systemd-test systemctl status nekro --no-pager >&2; fail "nekro.service never answered /healthz"; }
docker exec nekro-systemd-test nekro doctor --data /var/lib/nekro >/dev/null || fail "nekro doctor beside the service failed"
docker exec nekro-systemd-test systemctl stop nekro
[ "$(docker exec nekro-systemd-test systemctl show -p Result --value nekro)" = success ] || fail "nekro.service did not stop cleanly"
echo "test-compose: compose's nekro and nekro.service ran here" >&2
