test a
proc P
test  a
