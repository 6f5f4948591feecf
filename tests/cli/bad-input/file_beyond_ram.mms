test file-beyond-ram
file F 100G
