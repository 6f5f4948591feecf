test a
proc P
P mmap A 18446744073709551616 rw private
