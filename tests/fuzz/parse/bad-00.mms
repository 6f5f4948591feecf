test a
proc P
P mmap A 3K rw private
