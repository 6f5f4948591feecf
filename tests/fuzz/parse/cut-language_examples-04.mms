test lang-signals-and-errnos
proc P
P mmap A 8K r private
expect-error SIGSEGV P write A 4K 1
expect-error EINVAL P munmap A+1 4K
P munmap A 8K
expect-error SIGSEGV P read A 4K
