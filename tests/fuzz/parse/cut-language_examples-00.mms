test lang-anon-write-read
proc P
P mmap A 16K rw private
P write A 8K 0x5a
P read A 8K 0x5a
P read A+8K 4K 0
expect P A mapped pte
expect P A+12K mapped none
expect P rss anon 8K
