test a
proc P
P mmap A 4K rw private
A write 0 4K 1
