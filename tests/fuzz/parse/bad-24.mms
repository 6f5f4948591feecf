test a
proc P
P mmap A 4K rw private
P write A 18446744073709555712 1
