proc P
test gup-longterm-shared-ro-localtmp-btrfs
# [RUN] R/O longterm GUP pin in MAP_SHARED file mapping ... with local tmpfile (btrfs)
file F 4K fs=btrfs
P mmap A 4K rw shared file=F
P write A 4K 0
P mprotect A 4K r
P gup H A 1 pin,longterm
expect H 1
unpin H
