# Shared by the workload scripts of scripts/record/ (sourced): where mmlab
# is, where the recordings go, and a wait for a server's port.
MMLAB=${MMLAB:-build/release/mmlab}
OUT=${OUT:-record-out}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# wait_for N CMD...: run CMD every 0.2 s until it succeeds, at most N times.
wait_for() {
  n=$1
  shift
  while [ "$n" -gt 0 ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
    n=$((n - 1))
  done
  echo "$0: gave up waiting for: $*" >&2
  return 1
}
