test a
P gup H A 1 write
