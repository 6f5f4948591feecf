test collapse-madvise-gup-fast-pin-eagain
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x54
P gup H A 4 pin,fast,longterm
expect H 4
expect-error EAGAIN P madvise A 2M collapse
unpin H
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x54
