proc P
test gup-longterm-shared-rw-memfd
# [RUN] R/W longterm GUP pin in MAP_SHARED file mapping ... with memfd
file F 4K
P mmap A 4K rw shared file=F
P write A 4K 0
P gup H A 1 pin,write,longterm
expect H 1
unpin H
