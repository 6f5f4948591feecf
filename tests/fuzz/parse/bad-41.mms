test a
proc P
P read B+4K 4K
