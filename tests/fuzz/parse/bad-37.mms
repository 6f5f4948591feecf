test a
xfail
