test lang-mprotect-mremap
proc P
P mmap A 8K rw private
P write A 8K 3
P mprotect A 4K r
expect-error SIGSEGV P write A 4K 4
expect-error EFAULT P mremap A 8K 16K B
P mprotect A 4K rw
P mremap A 8K 16K B
P read B 8K 3
expect P B+8K mapped none
P mmap Z 64K none private
P mremap B 16K 16K C to=Z+16K
P read C 8K 3
expect-error SIGSEGV P read B 4K
expect-error SIGSEGV P read Z 4K
