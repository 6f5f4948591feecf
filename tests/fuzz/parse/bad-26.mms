test a
proc P
P mmap A 17179869184G rw private
