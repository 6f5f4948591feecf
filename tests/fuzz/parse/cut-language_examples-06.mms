test lang-gup-errors
proc P
P mmap A 4K rw private
P gup H A 2 get
expect H 1
unpin H
P gup G A+4K 1 get
expect G -EFAULT
