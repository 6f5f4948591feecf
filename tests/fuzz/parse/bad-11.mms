test a
when cow.policy=rfc,fixd check
