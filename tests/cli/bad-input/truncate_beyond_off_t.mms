test truncate-beyond-off-t
file F 8K
truncate F 9223372036854775808
