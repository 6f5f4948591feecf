test a
proc P
P mmap A 4K rw shared file=F+4K
