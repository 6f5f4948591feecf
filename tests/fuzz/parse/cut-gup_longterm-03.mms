proc P
test gup-longterm-private-ro-fast-localtmp-btrfs
# [RUN] R/O longterm GUP-fast pin in MAP_PRIVATE file mapping ... with local tmpfile (btrfs)
file F 4K fs=btrfs
P mmap A 4K rw private file=F
P write A 4K 0
P mprotect A 4K r
P gup H A 1 pin,fast,longterm
expect H 1
unpin H
