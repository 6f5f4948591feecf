test gup-count-beyond-task-size
proc P
P mmap A 4K rw private
P gup H A+0x7fffff000000 34359738368 get
