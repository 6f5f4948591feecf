test addr-range-wraps
proc P
P mmap A 4K rw private
P read A+0x7fffffffe000 0x2000
