test a
proc P extra
