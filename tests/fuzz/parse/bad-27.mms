test a
proc P
P read A+0x10000000000000000 4K
