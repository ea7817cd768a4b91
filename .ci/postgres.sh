# shellcheck shell=bash
# Source this file to get a throwaway PostgreSQL cluster for the tests:
#
#   source .ci/postgres.sh    # exports NEKRO_TEST_DATABASE_URL
#
# It creates a cluster of its own (root cannot log in to the machine's
# default cluster, and tests must not touch it), starts it on a free local
# port with a random password, creates the database nekro_test, exports
# NEKRO_TEST_DATABASE_URL, and registers an EXIT trap that stops and drops
# the cluster. Clusters left behind by runs that were killed are dropped
# first. Any failure exits non-zero: a run that needs PostgreSQL must not
# go on without it.

nekro_pg_fail() { echo "postgres.sh: $*" >&2; return 1; }

nekro_pg_start() {
  local sudo="" ver port pw name c
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { nekro_pg_fail "need root or sudo to create a cluster"; return 1; }
    sudo="sudo"
  fi
  command -v pg_createcluster >/dev/null 2>&1 || { nekro_pg_fail "pg_createcluster not found (install postgresql)"; return 1; }
  ver=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
  [ -n "$ver" ] || { nekro_pg_fail "no PostgreSQL server under /usr/lib/postgresql"; return 1; }

  # Drop clusters of earlier runs whose shell is gone.
  for c in $(pg_lsclusters -h 2>/dev/null | awk -v v="$ver" '$1==v && $2 ~ /^nekro_ci_[0-9]+$/ {print $2}'); do
    if ! kill -0 "${c#nekro_ci_}" 2>/dev/null; then
      $sudo pg_dropcluster --stop "$ver" "$c" >/dev/null 2>&1 || true
    fi
  done

  # A free port: not used by another cluster, nothing listening. Below
  # Linux's ephemeral range (32768-60999): a port in it can be taken at
  # any moment as the local end of some outgoing connection, and the
  # server then fails to start ("Address already in use"), as it once did.
  port=25432
  while pg_lsclusters -h 2>/dev/null | awk '{print $3}' | grep -qx "$port" ||
        (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do
    port=$((port + 1))
  done
  name="nekro_ci_$$"
  pw=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

  $sudo pg_createcluster "$ver" "$name" -p "$port" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null ||
    { nekro_pg_fail "pg_createcluster $ver $name failed"; return 1; }
  NEKRO_PG_CLUSTER="$ver $name"
  trap 'nekro_pg_stop' EXIT
  $sudo pg_ctlcluster "$ver" "$name" start ||
    { nekro_pg_fail "pg_ctlcluster $ver $name start failed"; return 1; }
  $sudo runuser -u postgres -- psql -p "$port" -qX -v ON_ERROR_STOP=1 \
    -c "ALTER USER postgres PASSWORD '$pw'" -c "CREATE DATABASE nekro_test" >/dev/null ||
    { nekro_pg_fail "could not set up the cluster's user and database"; return 1; }
  export NEKRO_TEST_DATABASE_URL="postgres://postgres:$pw@127.0.0.1:$port/nekro_test?sslmode=disable"
  echo "postgres.sh: PostgreSQL $ver cluster $name on 127.0.0.1:$port (dropped on exit)" >&2
}

nekro_pg_stop() {
  if [ -n "${NEKRO_PG_CLUSTER:-}" ]; then
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    # shellcheck disable=SC2086
    $sudo pg_dropcluster --stop $NEKRO_PG_CLUSTER >/dev/null 2>&1 || true
    NEKRO_PG_CLUSTER=""
  fi
}

nekro_pg_start || exit 1
