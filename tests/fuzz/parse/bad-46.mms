test a
proc P
P mmap A 4K rw private
expect P A same Q A
