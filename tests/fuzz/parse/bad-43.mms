test a
proc P
P mmap A 8K rw private
P mremap A 4K 4K B to=C
