test a
P mmap A 4K rwz private
