# A GUP count far beyond its 4K region: the kernel returns the one page it
# can, and the caller's pages array is sized by the mapped run, not by the
# count (ctest runs this under a data-size limit the count's array exceeds).
test gup-count-beyond-region
proc P
P mmap A 4K rw private
P write A 4K 1
P gup H A 268000000 get
expect H 1
unpin H
P gup H2 A 268000000 pin,fast
expect H2 1
unpin H2
