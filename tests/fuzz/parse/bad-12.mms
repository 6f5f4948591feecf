test a
when cow.colour=rfc check
