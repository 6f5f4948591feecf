test a
when cow.policy=rfc
