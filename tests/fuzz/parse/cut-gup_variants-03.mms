test short-read-at-hole
proc P
P mmap A 64K rw private
P write A 32K 1
P mprotect A+32K 32K none
P gup H A 16 get
expect H 8
unpin H
