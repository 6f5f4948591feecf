test a
when cow.policy=rfc tune cow.policy fixed
