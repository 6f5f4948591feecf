test a
P gup H A 100000000000 get
