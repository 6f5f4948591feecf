test a
skip   # why
