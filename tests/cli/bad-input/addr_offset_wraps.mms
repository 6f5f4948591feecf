test addr-offset-wraps
proc P
P mmap A 4K rw private
P mmap B 4K rw private
P write A+18446744073709547520 1 1
