#!/usr/bin/env bash
# The whole test suite: system packages, a throwaway PostgreSQL cluster for
# the KV conformance suite and a private Docker engine for the docker
# sandbox backend (both stopped and removed on exit), vet, then every Go
# test. CI runs exactly this through `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh test

if [ -f .ci/postgres.sh ] && [ -z "${NEKRO_TEST_DATABASE_URL:-}" ]; then
  # Starts a cluster, exports NEKRO_TEST_DATABASE_URL and registers its
  # own cleanup.
  source .ci/postgres.sh
fi

if [ -f .ci/docker.sh ] && [ -z "${NEKRO_TEST_DOCKER_HOST:-}" ]; then
  # A private Docker engine for the docker sandbox backend's tests; stopped
  # on exit.
  source .ci/docker.sh
fi

echo "== gofmt and go vet" >&2
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed: $unformatted" >&2; exit 1; fi
go vet ./...

echo "== go test" >&2
go test -count=1 -timeout 20m ./...
