#!/usr/bin/env bash
# Local MongoDB wire-protocol stand-in for tests, benchmarks and the example app:
# FerretDB 1.24.2 on PostgreSQL 15, both on loopback.
#
#   scripts/dev-db.sh up      build if needed, start both, print the MongoDB URI
#   scripts/dev-db.sh down    stop what `up` started
#   scripts/dev-db.sh status  print the URI and exit 0 if running (FerretDB listening,
#                             PostgreSQL up), else print "not running" and exit 1
#   scripts/dev-db.sh uri     print the URI the stand-in uses, running or not
#   scripts/dev-db.sh built   exit 0 if `up` can start without building or installing anything
#   scripts/dev-db.sh stop-ferret | start-ferret   (fault tests: bounce FerretDB only)
#
# Idempotent. The built binary is cached outside the repo ($FWB_CACHE_DIR) and
# the data lives in $FWB_STATE_DIR; neither is ever written inside the checkout.
# Ports: FWB_FERRET_PORT (default 27018), FWB_PG_PORT (default 54329). A second instance is the
# same script with other ports and another FWB_STATE_DIR (test/support/private-server.ts does so).
set -euo pipefail

FERRET_VERSION=v1.24.2
CACHE_DIR=${FWB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fastify-write-buffer}
STATE_DIR=${FWB_STATE_DIR:-/var/tmp/fastify-write-buffer-db}
PG_PORT=${FWB_PG_PORT:-54329}
FERRET_PORT=${FWB_FERRET_PORT:-27018}
FERRET_BIN="$CACHE_DIR/ferretdb-$FERRET_VERSION"
PG_DATA="$STATE_DIR/pg"
URI="mongodb://127.0.0.1:$FERRET_PORT/"

log() { echo "dev-db: $*" >&2; }

pg_bindir() {
  local d
  for d in /usr/lib/postgresql/15/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

ensure_postgres() {
  if pg_bindir >/dev/null; then return 0; fi
  log "installing postgresql-15 (apt-get)"
  local SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql-15 >/dev/null
  pg_bindir >/dev/null || { log "postgresql-15 not found after install"; exit 1; }
}

ensure_ferretdb() {
  if [ -x "$FERRET_BIN" ]; then return 0; fi
  command -v go >/dev/null || { log "Go toolchain required to build FerretDB"; exit 1; }
  log "building FerretDB $FERRET_VERSION (first run only, a few minutes)"
  mkdir -p "$CACHE_DIR"
  local work; work=$(mktemp -d "$CACHE_DIR/build.XXXXXX")
  (
    cd "$work"
    export GOFLAGS=-mod=mod
    go mod init fwb-ferretdb-build >/dev/null 2>&1
    go mod edit -require=github.com/FerretDB/FerretDB@$FERRET_VERSION
    go mod download github.com/FerretDB/FerretDB
    local src; src=$(go list -m -f '{{.Dir}}' github.com/FerretDB/FerretDB)
    # FerretDB panics at start unless build/version/version.txt names a version;
    # the module cache copy is read-only and lacks it, so build from a patched copy.
    cp -r "$src" ferret-src && chmod -R u+w ferret-src
    echo "$FERRET_VERSION" > ferret-src/build/version/version.txt
    go mod edit -replace=github.com/FerretDB/FerretDB=./ferret-src
    cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/FerretDB/FerretDB/cmd/ferretdb"
GO
    go mod tidy >/dev/null 2>&1 || true
    go build -o ferretdb github.com/FerretDB/FerretDB/cmd/ferretdb
  )
  mv "$work/ferretdb" "$FERRET_BIN"
  rm -rf "$work"
  log "built $FERRET_BIN"
}

# PostgreSQL refuses to run as root: use the postgres account then.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_running() { [ -f "$PG_DATA/postmaster.pid" ] && as_pg "$(pg_bindir)/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; }
ferret_running() { [ -f "$STATE_DIR/ferretdb.pid" ] && kill -0 "$(cat "$STATE_DIR/ferretdb.pid")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_postgres() {
  local bin; bin=$(pg_bindir)
  mkdir -p "$STATE_DIR"
  [ "$(id -u)" -eq 0 ] && chown postgres "$STATE_DIR"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    as_pg "$bin/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  if ! pg_running; then
    as_pg "$bin/pg_ctl" -D "$PG_DATA" -l "$STATE_DIR/postgres.log" -w -t 60 start -o \
      "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$STATE_DIR \
       -c max_connections=1300 -c shared_buffers=256MB -c fsync=off -c synchronous_commit=off \
       -c full_page_writes=off" >/dev/null
  fi
  as_pg "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='ferretdb'" | grep -q 1 ||
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres ferretdb
}

start_ferret() {
  if ferret_running; then return 0; fi
  mkdir -p "$STATE_DIR/ferret-state"
  # FerretDB 1.x holds one PostgreSQL connection per statement of an update
  # command: a pool smaller than a bulk's update count deadlocks.
  nohup "$FERRET_BIN" \
    --listen-addr="127.0.0.1:$FERRET_PORT" \
    --handler=postgresql \
    --postgresql-url="postgres://postgres@127.0.0.1:$PG_PORT/ferretdb?pool_max_conns=1200" \
    --state-dir="$STATE_DIR/ferret-state" \
    --telemetry=disable --log-level=error --debug-addr=- \
    >>"$STATE_DIR/ferretdb.log" 2>&1 &
  echo $! > "$STATE_DIR/ferretdb.pid"
  local i
  for i in $(seq 1 100); do
    port_open "$FERRET_PORT" && return 0
    ferret_running || { log "FerretDB exited; see $STATE_DIR/ferretdb.log"; tail -20 "$STATE_DIR/ferretdb.log" >&2; exit 1; }
    sleep 0.1
  done
  log "FerretDB did not open port $FERRET_PORT"; exit 1
}

stop_ferret() {
  if ferret_running; then
    local pid; pid=$(cat "$STATE_DIR/ferretdb.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE_DIR/ferretdb.pid"
}

case "${1:-up}" in
  up)
    ensure_postgres
    ensure_ferretdb
    start_postgres
    start_ferret
    echo "$URI"
    ;;
  build) ensure_postgres; ensure_ferretdb ;;
  start-ferret) start_ferret; echo "$URI" ;;
  stop-ferret) stop_ferret ;;
  down)
    stop_ferret
    if pg_running; then as_pg "$(pg_bindir)/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null; fi
    ;;
  status)
    if port_open "$FERRET_PORT" && ferret_running && pg_running; then echo "$URI"; else echo "not running"; exit 1; fi
    ;;
  uri) echo "$URI" ;;
  built) [ -x "$FERRET_BIN" ] && pg_bindir >/dev/null ;;
  *) echo "usage: $0 up|down|status|uri|build|built|start-ferret|stop-ferret" >&2; exit 2 ;;
esac
