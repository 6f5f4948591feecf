test lang-file-shared
file F 64K fs=ext4
proc P
proc Q
P mmap A 64K rw shared file=F
Q mmap B 32K r shared file=F+32K
P write A+32K 4K 0x11
Q read B 4K 0x11
expect P A+32K same Q B
P gup H A 1 pin,fast,write,longterm
expect H -EFAULT
