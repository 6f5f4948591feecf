test a
proc P
P mmap P 4K rw private
