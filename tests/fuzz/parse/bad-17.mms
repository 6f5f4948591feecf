test a
proc P
expect P A soft-dirty maybe
