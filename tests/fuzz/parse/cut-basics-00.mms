test anon-read-maps-zero-page
proc P
P mmap A 16K rw private
P read A 16K 0
expect P A zero yes
expect P A mapped pte
expect P rss anon 0
P write A+4K 4K 7
expect P A+4K zero no
expect P A+4K exclusive yes
expect P rss anon 4K
expect counter fault.wp_copy 1
