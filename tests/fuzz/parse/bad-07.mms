tune cow.reuse most
