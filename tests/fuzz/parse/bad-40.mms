test a
proc P
Q mmap A 4K rw private
