test a
P write A 4K 256
