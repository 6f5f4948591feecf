test a
swap 100T
