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
# The replay beside Redis's own figures: the BGSAVE child's Private_Dirty
# (what rdb_last_cow_size sums) and the parent's RssAnon.
"$MMLAB" replay --column recorded --json "$OUT/redis.recorded.json" "$OUT/redis.mmtrace" >/dev/null
python3 - "$OUT/redis.recorded.json" "$OUT/redis.info" <<'PY'
import json, sys
mms = [m for m in json.load(open(sys.argv[1]))["columns"]["recorded"]["mms"] if m["comm"].startswith("redis")]
info = dict(l.split(":", 1) for l in open(sys.argv[2]) if ":" in l)
parent, child = mms[0], mms[-1]
cow, rss = int(info["rdb_last_cow_size"]), int(info["parent_rss_anon_kb"]) * 1024
print(f"BGSAVE child Private_Dirty: model {child['private_dirty_at_exit']}, Redis rdb_last_cow_size {cow}: "
      f"{100 * (child['private_dirty_at_exit'] - cow) / cow:+.2f}%")
print(f"parent RssAnon: model {parent['rss_anon_at_exit']}, /proc status {rss}: "
      f"{100 * (parent['rss_anon_at_exit'] - rss) / rss:+.2f}%")
PY
