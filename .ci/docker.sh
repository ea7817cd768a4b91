# shellcheck shell=bash
# Source this file to get a private Docker engine for the docker sandbox
# backend's tests:
#
#   source .ci/docker.sh   # exports NEKRO_TEST_DOCKER_HOST, _IMAGE, _ARGS
#
# It installs Debian's docker.io when dockerd is missing, starts a dockerd
# of its own (own socket, data and exec roots under a temp dir, no bridge,
# no iptables: it never touches a system engine), and builds the test
# image by `docker import` of an empty skeleton (no registry is reachable
# here): the tests bind the host's /usr read-only into it, so it runs the
# same python3 as the bubblewrap backend. An EXIT trap stops the engine
# and removes its files. Any failure exits non-zero.

nekro_docker_fail() { echo "docker.sh: $*" >&2; return 1; }

nekro_docker_start() {
  local sudo="" dir sock i
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { nekro_docker_fail "need root or sudo to start dockerd"; return 1; }
    sudo="sudo"
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "docker.sh: installing docker.io" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends docker.io >/dev/null ||
      { nekro_docker_fail "apt-get install docker.io failed"; return 1; }
  fi
  dir=$(mktemp -d /tmp/nekro-docker-XXXXXX)
  sock="$dir/docker.sock"
  NEKRO_DOCKER_DIR="$dir"
  local prev
  prev=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT$//")
  # shellcheck disable=SC2064
  trap "nekro_docker_stop; $prev" EXIT
  $sudo dockerd --iptables=false --ip6tables=false --bridge=none \
    --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
    -H "unix://$sock" >"$dir/dockerd.log" 2>&1 &
  for i in $(seq 1 100); do
    DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1 && break
    sleep 0.2
  done
  DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1 ||
    { tail -20 "$dir/dockerd.log" >&2; nekro_docker_fail "dockerd did not start"; return 1; }
  mkdir -p "$dir/image/app" "$dir/image/tmp" "$dir/image/etc"
  ln -s usr/bin "$dir/image/bin"; ln -s usr/lib "$dir/image/lib"; ln -s usr/lib64 "$dir/image/lib64"
  tar -C "$dir/image" -c . | DOCKER_HOST="unix://$sock" docker import - nekro-sandbox:test >/dev/null ||
    { nekro_docker_fail "docker import of the test image failed"; return 1; }
  export NEKRO_TEST_DOCKER_HOST="unix://$sock"
  export NEKRO_TEST_DOCKER_IMAGE="nekro-sandbox:test"
  export NEKRO_TEST_DOCKER_ARGS="-v /usr:/usr:ro"
  echo "docker.sh: private dockerd on $sock (stopped on exit)" >&2
}

nekro_docker_stop() {
  if [ -n "${NEKRO_DOCKER_DIR:-}" ] && [ -f "$NEKRO_DOCKER_DIR/dockerd.pid" ]; then
    local sudo="" pid
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    pid=$(cat "$NEKRO_DOCKER_DIR/dockerd.pid")
    DOCKER_HOST="unix://$NEKRO_DOCKER_DIR/docker.sock" docker rm -f $(DOCKER_HOST="unix://$NEKRO_DOCKER_DIR/docker.sock" docker ps -aq) >/dev/null 2>&1 || true
    $sudo kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    $sudo rm -rf "$NEKRO_DOCKER_DIR" 2>/dev/null || true
    NEKRO_DOCKER_DIR=""
  fi
}

nekro_docker_start || exit 1
