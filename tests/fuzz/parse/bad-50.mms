proc P
test a
P mmap A 4K rw private
test b
P read A 4K
