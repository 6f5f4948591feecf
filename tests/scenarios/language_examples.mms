# The examples of docs/scenario-language.md, each a test with expectations,
# so that the reference shows only what runs (ctest: scenario.language_examples
# and its gup-walk variants). Keep the two in step: an example changed there
# is changed here.

test lang-anon-write-read
proc P
P mmap A 16K rw private
P write A 8K 0x5a
P read A 8K 0x5a
P read A+8K 4K 0
expect P A mapped pte
expect P A+12K mapped none
expect P rss anon 8K

test lang-mthp-fault
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 4K 1
expect P A order 4
expect P A+60K order 4
expect sysfs transparent_hugepage/hugepages-64kB/stats/anon_fault_alloc 1

test lang-frames-and-smaps
sysfs transparent_hugepage/enabled always
proc P
P mmap A 2M rw private align=2M
P write A 4K 1
expect P smaps A AnonHugePages 2M
expect P status RssAnon 2M
P mmap B 4K rw private
P write B 4K 1
P fork C
C remember B
C write B 4K 2
expect C B other-frame
P remember B
P write B 4K 3
expect P B same-frame

test lang-read-maps-zero-page
proc P
P mmap A 4K r private
P read A 4K 0
expect P A zero yes
expect P rss anon 0

test lang-fork-cow
proc P
P mmap A 4K rw private
P write A 4K 1
P fork C
expect P A same C A
counters reset
C write A 4K 2
expect P A differ C A
expect counter fault.wp_copy 1
P read A 4K 1
C read A 4K 2
P write A 4K 3
expect counter fault.wp_reuse 1

test lang-signals-and-errnos
proc P
P mmap A 8K r private
expect-error SIGSEGV P write A 4K 1
expect-error EINVAL P munmap A+1 4K
P munmap A 8K
expect-error SIGSEGV P read A 4K

test lang-gup-pin-and-device-io
proc P
P mmap A 8K rw private
P write A 8K 7
P gup H A 2 pin,fast,write,longterm
expect H 2
expect P A pinned yes
expect P A exclusive yes
H write 0 4K 9
P read A 4K 9
H read 4K 4K 7
unpin H dirty
expect P A pinned no

test lang-gup-errors
proc P
P mmap A 4K rw private
P gup H A 2 get
expect H 1
unpin H
P gup G A+4K 1 get
expect G -EFAULT

test lang-dump
proc P
P mmap A 16K rw private
P write A 4K 1
P dump D A 16K
expect D pages 1 holes 3

test lang-file-shared
file F 64K fs=ext4
proc P
proc Q
P mmap A 64K rw shared file=F
Q mmap B 32K r shared file=F+32K
P write A+32K 4K 0x11
Q read B 4K 0x11
expect P A+32K same Q B
P gup H A 1 pin,fast,write,longterm
expect H -EFAULT

test lang-mprotect-mremap
proc P
P mmap A 8K rw private
P write A 8K 3
P mprotect A 4K r
expect-error SIGSEGV P write A 4K 4
expect-error EFAULT P mremap A 8K 16K B
P mprotect A 4K rw
P mremap A 8K 16K B
P read B 8K 3
expect P B+8K mapped none
P mmap Z 64K none private
P mremap B 16K 16K C to=Z+16K
P read C 8K 3
expect-error SIGSEGV P read B 4K
expect-error SIGSEGV P read Z 4K

test lang-mmap-placement
proc P
P mmap W 16K rw private
P write W 16K 1
P munmap W+8K 8K
expect-error EEXIST P mmap A 8K rw private noreplace=W+4K
P mmap A 8K rw private noreplace=W+8K
P write A 8K 2
P mmap B 8K rw private fixed=W+4K
P read W 4K 1
P read W+4K 8K 0
P read W+12K 4K 2
P munmap W 16K
P mmap C 4K rw private at=W+8K
P write C 4K 3
P read W+8K 4K 3

test lang-mlock
proc P
P mmap A 12K rw private
P mlock A 12K onfault
expect P rss anon 0
P munlock A+4K 4K
expect P locked 8K
P mlock A 12K
expect P rss anon 12K
expect-error EINVAL P madvise A 4K dontneed
P madvise A 4K dontneed_locked
P mremap A+8K 4K 4K B dontunmap
expect P locked 4K
P mmap C 8K rw private locked
expect P locked 12K
P munlockall
expect P locked 0

test lang-hugetlb
sysfs hugepages/hugepages-2048kB/nr_hugepages 1
proc P
P mmap A 2M rw private hugetlb=2M
P write A 2M 1
expect P A mapped pmd
expect sysfs hugepages/hugepages-2048kB/free_hugepages 0

test lang-swap-pageout
swap 16M
proc P
P mmap A 8K rw private
P write A 8K 0x42
P madvise A 8K pageout
expect P A swapped yes
expect vmstat pswpout 2
P read A 8K 0x42
expect P A swapped no

test lang-thp-collapse
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x21
expect P A mapped pte
P madvise A 2M collapse
expect P A mapped pmd
P read A 2M 0x21

test lang-khugepaged-and-clock
proc P
P mmap A 2M rw private align=2M
P write A 2M 0x22
P madvise A 2M hugepage
khugepaged 1
expect P A mapped pmd
advance 10s
expect P A mapped pmd

test lang-thp-disable
sysfs transparent_hugepage/enabled always
proc P
P thp-disable yes
P mmap A 2M rw private align=2M
P write A 4K 1
expect P A mapped pte
P thp-disable no
P mmap B 2M rw private align=2M
P write B 4K 1
expect P B mapped pmd

test lang-userfaultfd
proc P
P mmap A 8K rw private
P write A+4K 4K 5
P userfaultfd A 8K missing,wp
expect-error SIGBUS P read A 4K
P uffd-wp A+4K 4K on
expect P A+4K uffd-wp yes
expect-error SIGBUS P write A+4K 4K 6
P uffd-wp A+4K 4K off
P write A+4K 4K 6

test lang-soft-dirty
proc P
P mmap A 4K rw private
P write A 4K 1
expect P A soft-dirty yes
P clear-soft-dirty
expect P A soft-dirty no
P write A 4K 2
expect P A soft-dirty yes

test lang-tune
# The default cow.policy base copies one 4K page; fixed copies the read-only 64K folio whole.
tune cow.policy fixed
sysfs transparent_hugepage/hugepages-64kB/enabled always
proc P
P mmap A 64K rw private align=64K
P write A 64K 1
P fork C
counters reset
C write A 4K 2
expect C A order 4
expect counter cow.copy.order4 1
C read A+4K 60K 1
P read A 64K 1

test lang-when
proc P
P mmap A 64K rw private
P write A 64K 1
counters reset
P gup H A 16 get
expect H 16
when gup.walk=legacy,v6.5 expect counter gup.descents 16
when gup.walk=walk,batch,batch-ro expect counter gup.descents 1
expect counter gup.grab 16
check

test lang-expect-violation
proc P
P mmap A 4K rw private
P write A 4K 1
expect violation expected every byte
P read A 4K 2

test lang-xfail
xfail shows how an expected failure is reported
proc P
P mmap A 4K rw private
P read A 4K 1

test lang-skip
skip shows how a skipped test is reported
proc P

test lang-print
proc P
P mmap A 64K rw private
P write A 8K 1
P print smaps A 64K
P print pagetable A 64K
P print folio A
counters print fault.*

test lang-inject
sysfs transparent_hugepage/enabled never
proc P
P mmap A 4K rw private
P write A 4K 0x23
P fork C
inject copy_mc times 1
expect-error SIGBUS C write A 4K 0x24
expect counter inject.copy_mc 1
C write A 4K 0x24
P read A 4K 0x23
C read A 4K 0x24

test lang-truncate
file F 16K
proc P
P mmap A 16K rw shared file=F
P mmap B 16K rw private file=F
P write A 16K 1
P write B 4K 2
punch-hole F 0 8K
P read A 8K 0
P read B 4K 2
truncate F 8K
expect-error SIGBUS P read A+8K 4K
P madvise A 8K remove
P read B 4K 2

test lang-race
proc P
P mmap A 64K rw private
P write A 64K 1
race pct=2 runs=100 seed=1
thread F
P fork C
thread W
P write A 64K 2
end
P read A 64K 2
check

test lang-race-directed
proc P
P mmap A 64K rw private
P write A 64K 1
race schedule="F@down_write W F"
thread F
P fork C
thread W
P write A 64K 2
end
C read A 64K 2

test lang-race-expect-violation
proc P
P mmap A 64K rw private
P write A 64K 1
expect violation expected every byte
race dfs=1
thread F
P fork C
thread W
P write A 64K 2
end
C read A 64K 1
