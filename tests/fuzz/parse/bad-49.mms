test a
proc P
P fork P
