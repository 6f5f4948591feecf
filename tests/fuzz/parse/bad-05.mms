tune cow.max_order -1
