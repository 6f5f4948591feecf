tune cow.order 4
