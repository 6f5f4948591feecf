test lang-gup-pin-and-device-io
proc P
P mmap A 8K rw private
P write A 8K 7
P gup H A 2 pin,fast,write,longterm
expect H 2
expect P A pinned yes
expect P A exclusive yes
H write 0 4K 9
P read A 4K 9
H read 4K 4K 7
unpin H dirty
expect P A pinned no
