#!/bin/sh
# Redis BGSAVE under a SET load (docs/RECORD.md): redis-server recorded
# from its start; redis-benchmark (outside the trace) fills 100,000 keys
# of 256 bytes and keeps writing while a BGSAVE child snapshots them.
# Writes $OUT/redis.mmtrace and $OUT/redis.info (Redis's own figures:
# rdb_last_cow_size is the child's Private_Dirty, summed by Redis).
set -eu
. "$(dirname "$0")/common.sh"
port=6399
cli() { redis-cli -p $port "$@" | tr -d '\r'; }
"$MMLAB" record --rss --out "$OUT/redis.mmtrace" -- \
  redis-server --port $port --save '' --appendonly no --dir "$work" --daemonize no >"$OUT/redis.record.log" 2>&1 &
rec=$!
wait_for 100 redis-cli -p $port ping
redis-benchmark -p $port -t set -n 200000 -r 100000 -d 256 -q >/dev/null
redis-benchmark -p $port -t set -n 400000 -r 100000 -d 256 -q >/dev/null &
load=$!
sleep 1
cli bgsave
sleep 0.2
while [ "$(cli info persistence | sed -n 's/^rdb_bgsave_in_progress://p')" = 1 ]; do sleep 0.1; done
wait $load
{
  cli info persistence | grep -E '^(rdb_last_cow_size|rdb_last_bgsave_status):'
  cli info memory | grep -E '^used_memory_rss:'
  echo "parent_rss_anon_kb:$(awk '/^RssAnon:/ {print $2}' /proc/"$(cli info server | sed -n 's/^process_id://p')"/status)"
  cli config get disable-thp | tr '\n' ' '
  echo
} >"$OUT/redis.info"
cli shutdown nosave || true
wait $rec
cat "$OUT/redis.info"
