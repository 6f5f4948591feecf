tune cow.max_order 9
