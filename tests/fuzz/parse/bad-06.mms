tune cow.max_order 04
