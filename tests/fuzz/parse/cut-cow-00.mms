proc P
test cow-anon-basic-fork-base
# [RUN] Basic COW after fork() ... with base page
P mmap A 4K rw private
P madvise A 4K nohugepage
P write A 4K 1
P fork C
P write A 4K 0xff
C read A 4K 1
P read A 4K 0xff
C exit
