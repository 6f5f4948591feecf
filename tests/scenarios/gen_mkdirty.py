#!/usr/bin/env python3
"""Generates the replay of the kernel's mkdirty.c selftest as mkdirty.mms.
The selftest checks that no path that may set a PTE or PMD dirty in a
read-only MAP_PRIVATE mapping also makes it writable: after each path, a
CPU write must still end with SIGSEGV and leave the byte as it was
(do_test_write_sigsegv). Here that is `expect-error SIGSEGV P write A 1 2`
followed by `P read A 1 1`: the model's CPU, like the MMU, writes without
a fault through a writable PTE or PMD, so a dirty-and-writable entry would
let the write through.

The /proc/self/mem write of the two PTRACE cases is what mem_rw() does: a
get_user_pages_remote(FOLL_FORCE | FOLL_WRITE) of the page (`P gup H A 1
get,write,force`; the remote variant adds FOLL_TOUCH as get_user_pages
does), the byte copied into it (`H write`), then set_page_dirty_lock() and
put_page() (`unpin H dirty`). The selftest's "THP populated?" check
(pagemap of the last subpage, else SKIP) is `expect P A+2044K mapped pmd`:
the model and the host both give the THP at the defaults.

Replayed: test_ptrace_write, test_ptrace_write_thp, test_pte_mapped_thp
(3 of the 6 cases). On the host the tests with a FOLL_FORCE write (the
two PTRACE cases and one of mmlab's below) SKIP: the host agent takes no
FOLL_FORCE GUP (docs/HOST.md), although /proc/PID/mem would be its
interface.

Not replayed, and why:
- test_page_migration, test_page_migration_thp: the language has no
  mbind()/migrate_pages()/move_pages(); the model migrates anonymous
  folios only for a FOLL_LONGTERM pin out of ZONE_MOVABLE, and a test
  cannot give its System a movable zone.
- test_uffdio_copy: the language's `userfaultfd` registers a range but has
  no UFFDIO_COPY (and the host agent cannot register userfaultfd at all).
- main()'s THP-size probe (pmd_psize): the PMD size is 2M on both sides.

Added by mmlab, not in the selftest (the `mkdirty-x-` tests), to check
the other half of the property, that making such a page writable again
does not skip copy-on-write:
- the PTE-mapped THP case with the PMD split by MADV_DONTNEED of the last
  subpage instead of mprotect;
- mprotect(PROT_READ|PROT_WRITE) after fork(), of a dirty anonymous page
  and of a dirty PMD-mapped THP that were made read-only before the fork:
  mprotect must not map the shared page writable, so the parent's write
  copies and the child keeps its byte;
- the same after a FOLL_FORCE write into a read-only mapping (model only,
  as the PTRACE cases).

    ./gen_mkdirty.py             # writes mkdirty.mms here
    ./gen_mkdirty.py --out DIR   # ... into DIR instead
"""
import replay_file

THP = "2M"
LAST = "A+2044K"  # the THP's last subpage

# The selftest's do_test_write_sigsegv on the first byte, which holds 1.
WRITE_SIGSEGV = [
    "# a write must still fault, and leave the byte as it was",
    "expect-error SIGSEGV P write A 1 2",
    "P read A 1 1",
]

# mem_rw(): the FOLL_FORCE write of one byte 1 through /proc/self/mem.
PTRACE_WRITE = [
    "# the write() to /proc/self/mem: GUP with FOLL_FORCE|FOLL_WRITE, copy, dirty, put",
    "P gup H A 1 get,write,force",
    "expect H 1",
    "H write 0 1 1",
    "unpin H dirty",
    "P read A 1 1",
]


def thp_range(prot):
    """mmap_thp_range: a 2M-aligned PMD-sized range with MADV_HUGEPAGE."""
    return [f"P mmap A {THP} {prot} private align={THP}",
            f"P madvise A {THP} hugepage"]


def dirty_thp_read_only():
    """Write the first page (a fresh THP, dirty), mprotect it read-only."""
    return thp_range("rw") + [
        "P write A 4K 1",
        f"P mprotect A {THP} r",
        "# the THP was populated (the selftest skips otherwise)",
        f"expect P {LAST} mapped pmd",
    ]


# (test name, the selftest's [INFO] text, statements)
TESTS = [
    ("mkdirty-ptrace-write", "PTRACE write access", [
        "P mmap A 4K r private",
        "# fault in the shared zero page",
        "P read A 1 0",
        "expect P A zero yes",
    ] + PTRACE_WRITE + [
        "expect P A zero no",
    ] + WRITE_SIGSEGV),
    ("mkdirty-ptrace-write-thp", "PTRACE write access to THP",
     thp_range("r") + PTRACE_WRITE + [
         "# the write placed a fresh THP (the selftest skips otherwise)",
         f"expect P {LAST} mapped pmd",
     ] + WRITE_SIGSEGV),
    ("mkdirty-pte-mapped-thp", "PTE-mapping a THP",
     dirty_thp_read_only() + [
         "# PTE-map the THP by mprotect of its last subpage",
         f"P mprotect {LAST} 4K rw",
         "expect P A mapped pte",
     ] + WRITE_SIGSEGV),
]

# mprotect(PROT_READ|PROT_WRITE) in the parent after fork, then a write.
AFTER_FORK_RW = [
    "P fork C",
    "expect P A same C A",
    "P mprotect A {size} rw",
    "# the page is shared with C: the write must copy it",
    "P write A 1 2",
    "expect P A differ C A",
    "C read A 1 1",
    "P read A 1 2",
]


def after_fork_rw(size):
    return [line.format(size=size) for line in AFTER_FORK_RW]


EXTRA = [
    ("mkdirty-x-pte-mapped-thp-dontneed", "PTE-mapping a THP by MADV_DONTNEED (mmlab)",
     dirty_thp_read_only() + [
         "# PTE-map the THP by MADV_DONTNEED of its last subpage",
         f"P madvise {LAST} 4K dontneed",
         "expect P A mapped pte",
         f"P read {LAST} 4K 0",
     ] + WRITE_SIGSEGV),
    ("mkdirty-x-mprotect-rw-after-fork", "mprotect(PROT_READ|PROT_WRITE) after fork (mmlab)", [
        "P mmap A 4K rw private",
        "P write A 4K 1",
        "P mprotect A 4K r",
    ] + WRITE_SIGSEGV + after_fork_rw("4K")),
    ("mkdirty-x-mprotect-rw-after-fork-thp", "mprotect(PROT_READ|PROT_WRITE) of a THP after fork (mmlab)",
     dirty_thp_read_only() + WRITE_SIGSEGV + after_fork_rw(f"{THP}") + [
         f"C read {LAST} 4K 0",
     ]),
    ("mkdirty-x-ptrace-write-fork-mprotect-rw", "PTRACE write access, fork, mprotect(PROT_READ|PROT_WRITE) (mmlab)", [
        "P mmap A 4K r private",
        "P read A 1 0",
    ] + PTRACE_WRITE + WRITE_SIGSEGV + after_fork_rw("4K")),
]


def gen():
    out = ["# Generated by gen_mkdirty.py from tools/testing/selftests/mm/mkdirty.c.",
           "# Do not edit by hand: change the generator and run it again.",
           "",
           "proc P"]
    for name, text, lines in TESTS + EXTRA:
        out += ["", f"test {name}", f"# [RUN] {text}"] + lines
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    replay_file.main(__doc__, "mkdirty.mms", gen)
