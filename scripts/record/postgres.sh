#!/bin/sh
# PostgreSQL 15 under pgbench -C (a backend forked per connection), 64 MB
# of shared_buffers: the postmaster recorded from its start, pgbench
# outside the trace. Writes $OUT/postgres.mmtrace.
set -eu
. "$(dirname "$0")/common.sh"
bin=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
port=5499
data="$work/data"
chown postgres "$work"
as_pg() { runuser -u postgres -- "$@"; }
as_pg "$bin/initdb" -D "$data" -A trust >/dev/null
"$MMLAB" record --out "$OUT/postgres.mmtrace" -- \
  runuser -u postgres -- "$bin/postgres" -D "$data" -p $port -k "$work" -c shared_buffers=64MB \
  -c max_connections=20 >"$OUT/postgres.record.log" 2>&1 &
rec=$!
wait_for 100 as_pg "$bin/pg_isready" -h "$work" -p $port
as_pg "$bin/pgbench" -h "$work" -p $port -i -s 4 postgres >/dev/null 2>&1
as_pg "$bin/pgbench" -h "$work" -p $port -C -c 2 -j 2 -T 20 postgres 2>/dev/null | grep -E '^(tps|number of transactions actually)'
as_pg "$bin/pg_ctl" -D "$data" stop -m fast >/dev/null
wait $rec
