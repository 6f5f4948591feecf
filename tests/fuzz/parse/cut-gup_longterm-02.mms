proc P
test gup-longterm-private-rw-fast-memfd
# [RUN] R/W longterm GUP-fast pin in MAP_PRIVATE file mapping ... with memfd
file F 4K
P mmap A 4K rw private file=F
P write A 4K 0
P gup H A 1 pin,fast,write,longterm
expect H 1
unpin H
