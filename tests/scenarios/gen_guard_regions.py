#!/usr/bin/env python3
"""Generates the replay of the kernel's guard-regions.c selftest (guard
regions, MADV_GUARD_INSTALL and MADV_GUARD_REMOVE) as guard_regions.mms:
each TEST_F for each backing variant the test runs it on (anon: private
anonymous memory; shmem: a shared memfd; file: a shared mapping of a file
on a local file system, ext4 here), one test per pair. An access the
selftest expects to fault is `expect-error SIGSEGV P read`
(try_read_write_buf stops at the failed read); one it expects to succeed
is a read, then a write of 'x' over the page.

Not replayed, and why:
- process_madvise: the language has no process_madvise().
- uffd: a userfaultfd registration the host agent cannot make.
- madvise_sequential: MADV_SEQUENTIAL is not in the language, and the
  model does not reclaim page cache.
- readonly_file, memfd_write_seal: no reopening a file read-only and no
  seals in the language.
- fault_around: MADV_PAGEOUT of page cache (the model does not reclaim
  it, so the test's major faults would not happen).
- truncation, hole_punch: no ftruncate() or MADV_REMOVE in the language.
- pagemap_scan: PAGEMAP_SCAN is not in the language (`expect P A guard`
  reads what pagemap shows, which the pagemap test replays).
- smaps: the VmFlags "gu" flag is v6.19 (VMA_MAYBE_GUARD), after the
  kernels this project follows.
- collapse on shmem and file: the model does not collapse file memory.

    ./gen_guard_regions.py             # writes guard_regions.mms here
    ./gen_guard_regions.py --out DIR   # ... into DIR instead
"""
import replay_file

PAGE_KB = 4
VARIANTS = ["anon", "shmem", "file"]


def at(region, page):
    return region if page == 0 else f"{region}+{page * PAGE_KB}K"


class T:
    """One test's lines for one variant."""

    def __init__(self, variant):
        self.v = variant
        self.lines = []

    def add(self, *lines):
        self.lines += lines

    def mmap(self, region, pages, prot="rw", place="", off_pages=0):
        size = f"{pages * PAGE_KB}K"
        opt = f" {place}" if place else ""
        if self.v == "anon":
            self.add(f"P mmap {region} {size} {prot} private{opt}")
        else:
            off = f"+{off_pages * PAGE_KB}K" if off_pages else ""
            self.add(f"P mmap {region} {size} {prot} shared file=F{off}{opt}")

    def guard(self, region, page, pages=1, err=None):
        line = f"P madvise {at(region, page)} {pages * PAGE_KB}K guard_install"
        self.add(f"expect-error {err} {line}" if err else line)

    def unguard(self, region, page, pages=1, err=None):
        line = f"P madvise {at(region, page)} {pages * PAGE_KB}K guard_remove"
        self.add(f"expect-error {err} {line}" if err else line)

    def faults(self, region, pages, who="P"):
        for p in pages:
            self.add(f"expect-error SIGSEGV {who} read {at(region, p)} 4K")

    def reads(self, region, pages, byte=None, who="P"):
        b = f" {byte}" if byte is not None else ""
        for p in pages:
            self.add(f"{who} read {at(region, p)} 4K{b}")

    def rw(self, region, pages, who="P"):
        """try_read_write_buf that succeeds: read, then write 'x'."""
        for p in pages:
            self.add(f"{who} read {at(region, p)} 4K", f"{who} write {at(region, p)} 4K 0x78")

    def pattern(self, region, pages):
        for i in range(pages):
            self.add(f"P write {at(region, i)} 4K {0x61 + i % 26:#04x}")


def basic(t):
    t.mmap("A", 10)
    t.rw("A", [0])
    t.guard("A", 0)
    t.faults("A", [0])
    t.rw("A", range(1, 10))
    t.guard("A", 9)
    t.faults("A", [0, 9])
    t.unguard("A", 0)
    t.rw("A", [0])
    t.unguard("A", 9)
    t.rw("A", [9])
    t.guard("A", 0, 3)
    t.faults("A", range(3))
    t.rw("A", range(3, 10))
    t.unguard("A", 0, 10)
    t.rw("A", range(10))
    t.unguard("A", 0, 10)
    # Removing markers leaves what is mapped: every page still reads 'x'.
    t.reads("A", range(10), byte="0x78")


def multi_vma(t):
    t.mmap("R", 100, prot="none")
    t.mmap("A1", 10, place="fixed=R")
    t.mmap("A2", 5, place="fixed=R+200K")
    t.mmap("A3", 20, place="fixed=R+320K")
    t.add("P munmap R+40K 160K", "P munmap R+220K 100K")
    # Over the gaps the VMAs are guarded and the call says ENOMEM.
    t.guard("R", 0, 100, err="ENOMEM")
    t.faults("A1", range(10))
    t.faults("A2", range(5))
    t.faults("A3", range(20))
    t.unguard("R", 0, 100, err="ENOMEM")
    t.rw("A1", range(10))
    t.rw("A2", range(5))
    t.rw("A3", range(20))
    # VMAs that cannot merge with their neighbours fill the gaps.
    t.mmap("G1", 40, prot="rwx", place="fixed=R+40K", off_pages=10)
    t.mmap("G2", 25, prot="rwx", place="fixed=R+220K", off_pages=55)
    t.guard("R", 0, 100)
    t.faults("R", range(100))
    t.unguard("R", 0, 100)
    t.rw("R", range(100))
    t.add("P munmap R 400K")


def munmap(t):
    t.mmap("A", 10)
    t.guard("A", 0)
    t.guard("A", 9)
    t.faults("A", [0, 9])
    t.add("P munmap A 4K", "P munmap A+36K 4K")
    t.mmap("N1", 1, place="fixed=A")
    t.mmap("N2", 1, place="fixed=A+36K", off_pages=9)
    t.rw("A", [0, 9])
    t.add("P munmap A 40K")


def mprotect(t):
    t.mmap("A", 10)
    t.guard("A", 5, 2)
    t.faults("A", [5, 6])
    t.add("P mprotect A+20K 8K r")
    t.faults("A", [5, 6])
    t.guard("A", 5, 2)
    t.faults("A", [5, 6])
    t.unguard("A", 0, 10)
    t.reads("A", range(10))
    t.add("P munmap A 40K")


def split_merge(t):
    t.mmap("A", 10)
    t.guard("A", 0, 10)
    t.faults("A", range(10))
    t.add("P munmap A+8K 4K", "P munmap A+20K 4K", "P munmap A+32K 4K")
    t.faults("A", [0, 1, 3, 4, 6, 7, 9])
    for p in (2, 5, 8):
        t.mmap(f"N{p}", 1, place=f"fixed=A+{p * PAGE_KB}K", off_pages=p)
    t.rw("A", [2, 5, 8])
    t.faults("A", [0, 1, 3, 4, 6, 7, 9])
    t.guard("A", 0, 10)
    t.faults("A", range(10))
    t.add("P mprotect A 12K r", "P mprotect A+28K 12K r")
    t.faults("A", range(10))
    t.add("P mprotect A 12K rw", "P mprotect A+28K 12K rw")
    t.faults("A", range(10))
    t.add("P mprotect A 12K r", "P mprotect A+28K 12K r")
    t.unguard("A", 0, 10)
    t.reads("A", range(10))
    t.add("P mprotect A 12K rw", "P mprotect A+28K 12K rw")
    t.rw("A", range(10))
    t.add("P munmap A 40K")


def dontneed(t):
    t.mmap("A", 10)
    for i in range(10):
        t.add(f"P write {at('A', i)} 4K 0x79")
    for i in range(0, 10, 2):
        t.guard("A", i)
    t.add("P madvise A 40K dontneed")
    for i in range(10):
        if i % 2 == 0:
            t.faults("A", [i])
            t.add(f"expect-error SIGSEGV P write {at('A', i)} 4K 0x78")
        else:
            # Anonymous memory reads zero again; a file gives its data back.
            t.reads("A", [i], byte="0" if t.v == "anon" else "0x79")
            t.add(f"P write {at('A', i)} 4K 0x78")
    t.add("P munmap A 40K")


def mlock(t):
    t.mmap("A", 10)
    for i in range(10):
        t.add(f"P write {at('A', i)} 4K 0x79")
    t.add("P mlock A 40K")
    t.guard("A", 0, 10, err="EINVAL")
    t.add("P munlock A 40K")
    t.guard("A", 0, 5)
    t.faults("A", range(5))
    t.rw("A", range(5, 10))
    t.reads("A", range(5, 10), byte="0x78")
    # Only the unguarded half can be locked (locking populates).
    t.add("P mlock A+20K 20K")
    t.unguard("A", 0, 10)  # allowed in a locked range: it destroys nothing
    t.rw("A", range(10))
    t.add("P munmap A 40K")


def mremap_move(t):
    t.mmap("A", 5)
    t.guard("A", 0)
    t.guard("A", 4)
    t.faults("A", [0, 4])
    t.mmap("T", 5, prot="none")
    t.add("P mremap A 20K 20K B to=T")
    t.faults("B", [0, 4])
    t.add("P munmap B 20K")


def mremap_expand(t):
    t.mmap("A", 10)
    t.add("P munmap A+20K 20K")
    t.guard("A", 0)
    t.guard("A", 4)
    t.faults("A", [0, 4])
    t.add("P mremap A 20K 40K B")
    t.faults("B", [0, 4])
    t.mmap("T", 20, prot="none")
    t.add("P mremap B 40K 80K C to=T")
    t.faults("C", [0, 4])
    t.add("P munmap C 80K")


def mremap_shrink(t):
    t.mmap("A", 5)
    t.guard("A", 0)
    t.guard("A", 4)
    t.faults("A", [0, 4])
    t.add("P mremap A 20K 12K B")
    t.faults("B", [0])
    t.rw("B", [1, 2])
    t.add("P mremap B 12K 20K C")
    t.faults("C", [0])
    t.rw("C", range(1, 5))
    t.add("P munmap C 20K")


def fork(t):
    t.mmap("A", 10)
    t.guard("A", 0, 5)
    t.add("P fork C")
    t.faults("A", range(5), who="C")
    t.rw("A", range(5, 10), who="C")
    t.add("C madvise A 40K guard_remove", "C exit")
    # The child's removal leaves the parent's markers.
    t.faults("A", range(5))
    t.rw("A", range(5, 10))
    t.add("P munmap A 40K")


def fork_cow(t):
    t.mmap("A", 10)
    t.pattern("A", 10)
    t.add("P fork C")
    for i in range(10):
        t.add(f"C read {at('A', i)} 4K {0x61 + i % 26:#04x}")
    t.add("C madvise A 40K guard_install", "C madvise A 40K guard_remove")
    # Installing zapped the child's pages: it reads zeroes now.
    t.add("C read A 40K 0", "C exit")
    for i in range(10):
        t.add(f"P read {at('A', i)} 4K {0x61 + i % 26:#04x}")
    t.add("P munmap A 40K")


def fork_wipeonfork(t):
    t.mmap("A", 10)
    t.add("P madvise A 40K wipeonfork")
    t.guard("A", 0, 5)
    t.add("P fork C")
    t.rw("A", range(10), who="C")
    t.add("C exit")
    t.faults("A", range(5))
    t.rw("A", range(5, 10))
    t.add("P munmap A 40K")


def lazyfree(t):
    t.mmap("A", 10)
    t.guard("A", 0, 10)
    t.faults("A", range(10))
    t.add("P madvise A 40K free")
    t.faults("A", range(10))
    t.add("P munmap A 40K")


def populate(t):
    t.mmap("A", 10)
    t.guard("A", 0, 10)
    t.add("expect-error EFAULT P madvise A 40K populate_read", "expect-error EFAULT P madvise A 40K populate_write",
          "P munmap A 40K")


def cold_pageout(t):
    t.mmap("A", 10)
    t.guard("A", 0, 10)
    t.faults("A", range(10))
    t.add("P madvise A 40K cold")
    t.faults("A", range(10))
    t.add("P madvise A 40K pageout")
    t.faults("A", range(10))
    t.add("P munmap A 40K")


def map_private(t):
    t.mmap("S", 10)
    t.add("P mmap Q 40K rw private file=F")
    t.pattern("S", 10)
    for i in range(0, 10, 2):
        t.guard("S", i)
    for i in range(10):
        (t.reads if i % 2 else t.faults)("S", [i])
        t.reads("Q", [i])
    for i in range(0, 10, 2):
        t.guard("Q", i)
    for i in range(10):
        (t.reads if i % 2 else t.faults)("S", [i])
        (t.reads if i % 2 else t.faults)("Q", [i])
    t.unguard("S", 0, 10)
    for i in range(10):
        t.reads("S", [i])
        (t.reads if i % 2 else t.faults)("Q", [i])
    t.unguard("Q", 0, 10)
    for i in range(10):
        t.reads("S", [i], byte=f"{0x61 + i:#04x}")
        t.reads("Q", [i], byte=f"{0x61 + i:#04x}")
    for i in range(0, 10, 2):
        t.add(f"P write {at('Q', i)} 4K {0x61 + i:#04x}")
    t.guard("Q", 0, 5)
    for i in range(10):
        (t.reads if i >= 5 else t.faults)("Q", [i])
        t.reads("S", [i])
    t.unguard("Q", 0, 10)
    # The private copies in the guarded half were zapped: those pages map
    # the file again; the others keep their private copies.
    for i in range(10):
        t.reads("Q", [i], byte=f"{0x61 + i:#04x}")
    t.add("P munmap S 40K", "P munmap Q 40K")


def anon_zeropage(t):
    t.mmap("A", 10, prot="r")
    for i in range(0, 10, 2):
        t.guard("A", i)
    for i in range(10):
        (t.reads if i % 2 else t.faults)("A", [i])
    t.unguard("A", 0, 10)
    t.add("P read A 40K 0", "P munmap A 40K")


def pagemap(t):
    t.mmap("A", 10)
    for i in range(10):
        t.add(f"expect P {at('A', i)} guard no")
    for i in range(0, 10, 2):
        t.guard("A", i)
    for i in range(10):
        t.add(f"expect P {at('A', i)} guard {'yes' if i % 2 == 0 else 'no'}")
    t.add("P munmap A 40K")


def collapse(t):
    t.mmap("A", 1024, prot="r", place="")
    t.add("P madvise A 4M nohugepage", "P madvise A 4M populate_read")
    for i in range(0, 1024, 2):
        t.add(f"P madvise {at('A', i)} 4K guard_install", f"expect-error SIGSEGV P read {at('A', i)} 4K")
    t.add("P madvise A 4M hugepage")
    # Every kernel fails it; which errno depends on how the scan stops.
    t.add("expect-error EINVAL P madvise A 4M collapse")
    t.faults("A", range(0, 1024, 2))


# (name, the variants it runs on, the body)
TESTS = [
    ("basic", VARIANTS, basic),
    ("multi_vma", VARIANTS, multi_vma),
    ("munmap", VARIANTS, munmap),
    ("mprotect", VARIANTS, mprotect),
    ("split_merge", VARIANTS, split_merge),
    ("dontneed", VARIANTS, dontneed),
    ("mlock", VARIANTS, mlock),
    ("mremap_move", VARIANTS, mremap_move),
    ("mremap_expand", VARIANTS, mremap_expand),
    ("mremap_shrink", VARIANTS, mremap_shrink),
    ("fork", VARIANTS, fork),
    ("fork_cow", ["anon"], fork_cow),
    ("fork_wipeonfork", ["anon"], fork_wipeonfork),
    ("lazyfree", ["anon"], lazyfree),
    ("populate", VARIANTS, populate),
    ("cold_pageout", VARIANTS, cold_pageout),
    ("map_private", ["shmem", "file"], map_private),
    ("anon_zeropage", ["anon", "shmem"], anon_zeropage),
    ("pagemap", VARIANTS, pagemap),
    ("collapse", ["anon"], collapse),
]


def file_line(variant):
    # The selftest's file is at least 100 pages (FIXTURE_SETUP truncates it so).
    return {"shmem": "file F 400K", "file": "file F 400K fs=ext4"}.get(variant)


def gen():
    out = ["# Generated by gen_guard_regions.py from tools/testing/selftests/mm/guard-regions.c.",
           "# Do not edit by hand: change the generator and run it again."]
    for name, variants, body in TESTS:
        for v in variants:
            t = T(v)
            body(t)
            out += ["", f"test guard-regions-{name.replace('_', '-')}-{v}", f"# [RUN] guard_regions.{v}.{name}"]
            if file_line(v):
                out.append(file_line(v))
            out.append("proc P")
            out += t.lines
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    replay_file.main(__doc__, "guard_regions.mms", gen)
