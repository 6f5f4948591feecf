test a
when cow.policy check
