test lang-dump
proc P
P mmap A 16K rw private
P write A 4K 1
P dump D A 16K
expect D pages 1 holes 3
