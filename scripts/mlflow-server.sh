#!/usr/bin/env bash
# A private MLflow tracking server on PostgreSQL, on 127.0.0.1 (docs/scale-out.md, "A shared MLflow server"):
#
#   scripts/mlflow-server.sh start  [--state DIR] [--port N]   install PostgreSQL if missing, start it and
#                                                               MLflow, print `export MLFLOW_TRACKING_URI=...`
#   scripts/mlflow-server.sh stop   [--state DIR]               stop MLflow, then PostgreSQL (data is kept)
#   scripts/mlflow-server.sh status [--state DIR]               exit 0 when both run, 3 when either is down
#
# Usage: eval "$(scripts/mlflow-server.sh start)"   (only the export line goes to stdout)
#
# Everything lives in the state folder (default cache/mlflow-server/ of the repository):
#   postgres/      the cluster (owned by the user that runs PostgreSQL)
#   artifacts/     MLflow's artifacts (--artifacts-destination; clients upload through the server)
#   pgpass         the database password (libpq password file, mode 600: it never appears in `ps`)
#   *.log, *.port, mlflow.pid
# A restart reuses the cluster, the database and (when still free) the MLflow port, so a run's
# recorded tracking URI stays valid. Settings: MLFLOW_SERVER_WORKERS (default 2), MLFLOW_SERVER_TIMEOUT
# (seconds to wait for /health, default 180), MLFLOW_SERVER_ENABLE_JOB_EXECUTION (default false),
# HACKABLE_RL_PYTHON (default .venv/bin/python).
#
# Exit codes: 0 ok; 1 usage or MLflow failure; 3 `status` found something stopped; 69 PostgreSQL could
# not be installed, initialised or started (the slow test skips on it).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$REPO/cache/mlflow-server"
PORT=""
DB_NAME="mlflow"
DB_ROLE="mlflow"
HOST="127.0.0.1"
EX_UNAVAILABLE=69

die() { echo "mlflow-server: $*" >&2; exit 1; }
die_postgres() { echo "mlflow-server: $*" >&2; exit "$EX_UNAVAILABLE"; }
say() { echo "mlflow-server: $*" >&2; }  # progress goes to stderr: stdout is only the export line

usage() {
  sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 1
}

parse_options() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --state) [ $# -ge 2 ] || die "--state needs a folder"; STATE="$2"; shift 2 ;;
      --port) [ $# -ge 2 ] || die "--port needs a number"; PORT="$2"; shift 2 ;;
      *) die "unknown option '$1' (expected --state DIR or --port N)" ;;
    esac
  done
  case "$PORT" in ''|*[!0-9]*) [ -z "$PORT" ] || die "--port '$PORT' is not a number" ;; esac
  if [ "$COMMAND" = start ]; then mkdir -p "$STATE" || die "--state $STATE: cannot create the folder"; fi
  if [ ! -d "$STATE" ]; then
    say "--state $STATE: no such folder, so nothing runs there"
    if [ "$COMMAND" = status ]; then exit 3; else exit 0; fi
  fi
  STATE="$(cd "$STATE" && pwd)"
  DATA="$STATE/postgres"
}

python_bin() {
  local venv="$REPO/.venv/bin/python"
  if [ -n "${HACKABLE_RL_PYTHON:-}" ]; then echo "$HACKABLE_RL_PYTHON"
  elif [ -x "$venv" ]; then echo "$venv"
  else command -v python3 || die "no Python found: set HACKABLE_RL_PYTHON to the project's python"
  fi
}

free_port() {
  "$(python_bin)" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_is_free() {
  "$(python_bin)" - "$1" <<'EOF'
import socket, sys
with socket.socket() as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no conflict
    try:
        probe.bind(("127.0.0.1", int(sys.argv[1])))
    except OSError:
        sys.exit(1)
EOF
}

# ----------------------------------------------------------------------------- PostgreSQL

pg_bin() {
  # The newest installed major version: Debian puts each one's server tools in /usr/lib/postgresql/<v>/bin.
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; fi
}

install_postgres() {
  [ -n "$(pg_bin)" ] && return 0
  [ "$(id -u)" -eq 0 ] || die_postgres "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); install it as root: apt-get install -y postgresql"
  command -v apt-get >/dev/null || die_postgres "PostgreSQL is not installed and there is no apt-get; install PostgreSQL's server by hand"
  say "installing PostgreSQL (apt-get install -y postgresql)"
  # A stale package list is the usual reason an install fails: update once, then try again.
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >"$STATE/apt.log" 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$STATE/apt.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >>"$STATE/apt.log" 2>&1 \
      || die_postgres "apt-get install postgresql failed: $(tail -n 1 "$STATE/apt.log")"
  fi
  [ -n "$(pg_bin)" ] || die_postgres "postgresql installed, yet no /usr/lib/postgresql/*/bin/initdb"
}

db_user() {
  # PostgreSQL refuses to run as root: root runs it as the `postgres` user the Debian package creates.
  if [ "$(id -u)" -eq 0 ]; then echo postgres; else id -un; fi
}

as_db_user() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

check_db_user_reaches_state() {
  [ "$(id -u)" -eq 0 ] || return 0
  id postgres >/dev/null 2>&1 \
    || die_postgres "PostgreSQL refuses to run as root and there is no user 'postgres' (useradd --system postgres, or run as a normal user)"
  as_db_user test -x "$STATE" \
    || die_postgres "--state $STATE: user postgres cannot enter it (a parent folder is closed to others; \`namei -m $STATE\` shows which); choose a folder it can reach, e.g. under /var/tmp"
}

write_password() {
  [ -s "$STATE/pgpass" ] && return 0
  local password
  password="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  (umask 077 && echo "$HOST:*:*:$DB_ROLE:$password" >"$STATE/pgpass")
}

init_cluster() {
  [ -f "$DATA/PG_VERSION" ] && return 0
  say "initialising a PostgreSQL cluster in $DATA"
  write_password
  mkdir -p "$DATA"
  chown "$(db_user)" "$DATA"
  chmod 700 "$DATA"
  local pwfile="$STATE/initdb-password"  # initdb reads it as the db user (the data folder must be empty); removed right after
  (umask 077 && cut -d: -f5- "$STATE/pgpass" >"$pwfile")
  chown "$(db_user)" "$pwfile"
  if ! as_db_user "$(pg_bin)/initdb" -D "$DATA" -U "$DB_ROLE" --pwfile="$pwfile" --auth=scram-sha-256 \
      --encoding=UTF8 --locale=C >"$STATE/initdb.log" 2>&1; then
    rm -f "$pwfile"
    die_postgres "initdb failed: $(tail -n 1 "$STATE/initdb.log") (see $STATE/initdb.log)"
  fi
  rm -f "$pwfile"
  # TCP on 127.0.0.1 only, and no Unix socket: its default folder belongs to the system cluster.
  printf "listen_addresses = '%s'\nunix_socket_directories = ''\n" "$HOST" >>"$DATA/postgresql.conf"
}

postgres_running() {
  [ -f "$DATA/PG_VERSION" ] && [ -n "$(pg_bin)" ] && as_db_user "$(pg_bin)/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

start_postgres() {
  if postgres_running; then
    PG_PORT="$(cat "$STATE/postgres.port")"
    return 0
  fi
  PG_PORT="$(free_port)"
  touch "$STATE/postgres.log"
  chown "$(db_user)" "$STATE/postgres.log"
  as_db_user "$(pg_bin)/pg_ctl" start -D "$DATA" -l "$STATE/postgres.log" -w -t 60 -o "-p $PG_PORT" >/dev/null \
    || die_postgres "PostgreSQL did not start: $(tail -n 1 "$STATE/postgres.log") (see $STATE/postgres.log)"
  echo "$PG_PORT" >"$STATE/postgres.port"
}

psql_as_role() {
  PGPASSFILE="$STATE/pgpass" "$(pg_bin)/psql" -h "$HOST" -p "$PG_PORT" -U "$DB_ROLE" -d postgres -tAq "$@"
}

create_database() {
  [ "$(psql_as_role -c "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" = "1" ] && return 0
  psql_as_role -c "CREATE DATABASE $DB_NAME" >/dev/null || die_postgres "could not create database $DB_NAME"
}

stop_postgres() {
  if postgres_running; then
    as_db_user "$(pg_bin)/pg_ctl" stop -D "$DATA" -m fast -w -t 60 >/dev/null || die "PostgreSQL did not stop (see $STATE/postgres.log)"
    say "PostgreSQL stopped"
  fi
}

# ----------------------------------------------------------------------------- MLflow

mlflow_pid() {
  # Alive and still MLflow: a pid left from before a reboot may now belong to another program.
  local pid
  pid="$(cat "$STATE/mlflow.pid" 2>/dev/null)" || return 1
  kill -0 "$pid" 2>/dev/null && grep -qa mlflow "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

healthy() {
  [ -n "$1" ] || return 1
  if command -v curl >/dev/null; then
    curl -fsS --max-time 3 "http://$HOST:$1/health" >/dev/null 2>&1
  else
    "$(python_bin)" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=3)" \
      "http://$HOST:$1/health" >/dev/null 2>&1
  fi
}

check_driver() {
  "$(python_bin)" -c "import mlflow, psycopg2" 2>/dev/null \
    || die "$(python_bin) lacks mlflow or psycopg2 (MLflow's PostgreSQL driver): pip install -e '.[server]'"
}

choose_port() {
  local recorded
  recorded="$(cat "$STATE/mlflow.port" 2>/dev/null || true)"
  if [ -n "$PORT" ]; then
    port_is_free "$PORT" || die "--port $PORT: $HOST:$PORT is already in use; stop what listens there or pass another --port"
    echo "$PORT"
  elif [ -n "$recorded" ] && port_is_free "$recorded"; then
    echo "$recorded"  # the port of the last start: runs that recorded the URI find the server again
  else
    free_port
  fi
}

start_mlflow() {
  mkdir -p "$STATE/artifacts"
  # setsid: MLflow and its workers form one process group, which `stop` ends as a whole.
  # `+psycopg2` names the driver: SQLAlchemy 2.1 would take psycopg 3 for a bare postgresql://.
  # No job runner: its eight helper processes (about 1 GB) serve GenAI jobs this project never submits.
  PGPASSFILE="$STATE/pgpass" MLFLOW_SERVER_ENABLE_JOB_EXECUTION="${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}" \
    setsid "$(python_bin)" -m mlflow server \
    --backend-store-uri "postgresql+psycopg2://$DB_ROLE@$HOST:$PG_PORT/$DB_NAME" \
    --artifacts-destination "$STATE/artifacts" \
    --host "$HOST" --port "$MLFLOW_PORT" --workers "${MLFLOW_SERVER_WORKERS:-2}" \
    >"$STATE/mlflow.log" 2>&1 </dev/null &
  echo $! >"$STATE/mlflow.pid"
  echo "$MLFLOW_PORT" >"$STATE/mlflow.port"
  wait_healthy
}

wait_healthy() {
  local deadline=$(( $(date +%s) + ${MLFLOW_SERVER_TIMEOUT:-180} ))
  until healthy "$MLFLOW_PORT"; do
    mlflow_pid >/dev/null || die "mlflow server exited: $(grep -v '^\s*$' "$STATE/mlflow.log" | tail -n 1) (see $STATE/mlflow.log)"
    [ "$(date +%s)" -lt "$deadline" ] || { stop_mlflow; die "mlflow server did not answer on $HOST:$MLFLOW_PORT/health within ${MLFLOW_SERVER_TIMEOUT:-180} s (see $STATE/mlflow.log)"; }
    sleep 0.5
  done
}

stop_mlflow() {
  local pid waited=0
  pid="$(mlflow_pid)" || { rm -f "$STATE/mlflow.pid"; return 0; }
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 60 ]; do sleep 0.5; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$STATE/mlflow.pid"
  say "MLflow stopped"
}

# ----------------------------------------------------------------------------- commands

start() {
  if pid="$(mlflow_pid)" && healthy "$(cat "$STATE/mlflow.port")"; then
    say "already running (pid $pid)"
    echo "export MLFLOW_TRACKING_URI=http://$HOST:$(cat "$STATE/mlflow.port")"
    return 0
  fi
  stop_mlflow  # a server that no longer answers
  # What can be refused is checked before PostgreSQL starts, so a refusal leaves nothing running.
  check_driver
  MLFLOW_PORT="$(choose_port)"
  install_postgres
  check_db_user_reaches_state
  init_cluster
  start_postgres
  create_database
  start_mlflow
  say "MLflow on http://$HOST:$MLFLOW_PORT (PostgreSQL on $HOST:$PG_PORT, state $STATE)"
  echo "export MLFLOW_TRACKING_URI=http://$HOST:$MLFLOW_PORT"
}

stop() {
  stop_mlflow
  stop_postgres
}

status() {
  local up=0 pid
  if pid="$(mlflow_pid)" && healthy "$(cat "$STATE/mlflow.port")"; then
    echo "mlflow: running on http://$HOST:$(cat "$STATE/mlflow.port") (pid $pid)"
  else
    echo "mlflow: stopped"; up=3
  fi
  if postgres_running; then echo "postgres: running on $HOST:$(cat "$STATE/postgres.port")"
  else echo "postgres: stopped"; up=3
  fi
  return "$up"
}

main() {
  [ $# -ge 1 ] || usage
  COMMAND="$1"
  shift
  case "$COMMAND" in
    start|stop|status) parse_options "$@"; "$COMMAND" ;;
    -h|--help|help) usage ;;
    *) die "unknown command '$COMMAND' (expected start, stop or status)" ;;
  esac
}

main "$@"
