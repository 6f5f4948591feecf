test collapse-madvise-uffd-armed-full-range
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x84
P userfaultfd A 2M missing
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x84

# ---- sysfs: the stores' rules ----
