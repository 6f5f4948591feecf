test lang-swap-pageout
swap 16M
proc P
P mmap A 8K rw private
P write A 8K 0x42
P madvise A 8K pageout
expect P A swapped yes
expect vmstat pswpout 2
P read A 8K 0x42
expect P A swapped no
