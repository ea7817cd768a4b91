#!/usr/bin/env bash
# Builds packaging/Dockerfile where no base image can be pulled and checks
# the image: `nekro doctor` inside it must pass (sandbox, Python stack,
# volumes). It takes minutes and downloads the Debian packages, so it is
# not part of `make test`:
#
#   packaging/test-image.sh
#
# It uses a private Docker engine (.ci/docker.sh, stopped on exit), a base
# image from packaging/debootstrap-base.sh, and a static bin/nekro.
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/docker.sh
export DOCKER_HOST="$NEKRO_TEST_DOCKER_HOST"

CGO_ENABLED=0 make build
packaging/debootstrap-base.sh nekro-base:local
docker build --network host --build-arg BASE=nekro-base:local -f packaging/Dockerfile -t nekro:local .

# --privileged, as compose.yaml runs it. Inside a container whose own
# root lacks a capability (CAP_SYS_RESOURCE on the VM this was written
# on) runc cannot grant it: then every other one, and the loop devices.
run=(--privileged)
if ! docker run --rm "${run[@]}" --entrypoint true nekro:local 2>/dev/null; then
  run=(--cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined
       --security-opt apparmor=unconfined --security-opt systempaths=unconfined)
  for d in /dev/loop-control /dev/loop[0-9]*; do run+=(--device "$d"); done
  echo "test-image: --privileged is refused here; running with: ${run[*]}" >&2
fi
out=$(docker run --rm --network host "${run[@]}" nekro:local doctor 2>&1) || { echo "$out" >&2; exit 1; }
echo "$out"
grep -q '^ok   bounded directories' <<<"$out" || { echo "test-image: volumes are off in the image" >&2; exit 1; }
echo "test-image: nekro doctor passes in nekro:local" >&2
