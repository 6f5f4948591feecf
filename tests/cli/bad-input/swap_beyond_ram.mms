test swap-beyond-ram
swap 1000G
