#!/usr/bin/env bash
# Run a command with a private PostgreSQL server on a free loopback port, its URL in
# PORTAL_TEST_POSTGRES_URL (the race tests rerun on it: SQLite serialises writers, so a race
# only READ COMMITTED can lose shows up on PostgreSQL alone), and stop the server after.
# Given PORTAL_TEST_POSTGRES_URL already, the command runs against that server instead.
set -euo pipefail

if [[ -n "${PORTAL_TEST_POSTGRES_URL:-}" ]]; then
  exec "$@"
fi
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
  echo "PostgreSQL's server is not installed (apt-get install postgresql): the race tests will say so" >&2
  exec "$@"
fi
data=$(mktemp -d /tmp/portal-test-postgres.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The server refuses to run as root: it runs as the postgres user when there is one.
as_postgres=()
if [[ $(id -u) -eq 0 ]]; then
  chown postgres: "$data"
  as_postgres=(runuser -u postgres --)
fi
stop() {
  "${as_postgres[@]}" "$bin/pg_ctl" -D "$data/db" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$data"
}
trap stop EXIT
"${as_postgres[@]}" "$bin/initdb" -D "$data/db" -U postgres --auth=trust -E UTF8 >/dev/null
"${as_postgres[@]}" "$bin/pg_ctl" -D "$data/db" -l "$data/server.log" -w -t 60 \
  -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
echo "PostgreSQL for the race tests on 127.0.0.1:$port" >&2
export PORTAL_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres"
"$@"
