test a
expect D pages 1 holes 0
