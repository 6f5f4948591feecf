tune cow.reuse
