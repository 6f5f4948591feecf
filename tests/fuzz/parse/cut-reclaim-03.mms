test free-gup-reference-keeps-folio
proc P
P mmap A 4K rw private
P madvise A 4K nohugepage
P write A 4K 0x44
P madvise A 4K free
P gup H A 1 get,fast
expect H 1
P madvise A 4K pageout
expect P A mapped pte
unpin H
P madvise A 4K pageout
expect P A mapped none
P read A 4K 0
