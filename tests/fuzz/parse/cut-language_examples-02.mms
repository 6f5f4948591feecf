test lang-read-maps-zero-page
proc P
P mmap A 4K r private
P read A 4K 0
expect P A zero yes
expect P rss anon 0
