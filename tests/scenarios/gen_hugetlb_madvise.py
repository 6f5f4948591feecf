#!/usr/bin/env python3
"""Generates the replay of the kernel's hugetlb-madvise.c selftest
(MADV_DONTNEED on hugetlb mappings) as hugetlb_madvise.mms. The selftest is
one sequence of six sections, each checking the 2M pool's free_hugepages
after its faults and madvise calls; each section is a test here, on a pool
of 20 pages, the selftest's MIN_FREE_PAGES (it skips with fewer free), so
its "free - N" is `expect sysfs hugepages/hugepages-2048kB/free_hugepages
20-N`. The selftest's pages are NR_HUGE_PAGES, 10.

How the selftest's steps are written here:
- Its hugetlb memfd, fallocate()d to 10 huge pages before each file
  section, is `file F 20M hugetlb=2M`: a file is allocated whole, so it
  takes its 10 pages from the pool when it is created, as the fallocate
  does. Each file section has a file of its own; the selftest reuses one
  memfd, emptied by a hole punch between the sections.
- A write fault (one unsigned long i at the start of huge page i) is a
  write of 8 bytes of byte i+1 there (i+1, so that a page that was zapped,
  which reads zeroes, is told from page 0); a read fault (a read of each
  huge page) is a read of 8 bytes at the start of each.
- Beyond the selftest, which checks only that they fail: the errno of the
  two out-of-range MADV_DONTNEED calls of the first section (ENOMEM: the
  range runs into a hole) and what they do before failing. madvise skips
  the hole and still advises the mapped part; MADV_DONTNEED on hugetlb
  rounds that part's end down to a huge page, so the first call frees 9 of
  the 10 pages and the second the 10th (free_hugepages after each, and the
  bytes read back). The EINVAL of the unaligned start of the second
  section, and that it frees nothing, are checked too.

- The hole punch (fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
  at the end of the private file section is `punch-hole F 0 20M`; it
  frees the file's pages and the private copies alike, as the selftest
  says hugetlbfs always has (hugetlb_vmdelete_list zaps private VMAs
  too). Beyond the selftest: the copies' reservations are back in the
  private mapping's reserve map (resv_hugepages 10) until its munmap.
- MADV_REMOVE of the shared file mapping (end of the shared file section)
  and of the shared mapping beside a private one (end of the last
  section) is `P madvise A 20M remove`, the same hole punch.

Not replayed, and why:
- The selftest's skip when fewer than 20 huge pages are free: the pool is
  sized for each test (the host runner sizes it and restores it after).

    ./gen_hugetlb_madvise.py             # writes hugetlb_madvise.mms here
    ./gen_hugetlb_madvise.py --out DIR   # ... into DIR instead
"""
import replay_file

POOL = 20  # MIN_FREE_PAGES
NR = 10    # NR_HUGE_PAGES
HP_MB = 2
FREE = "hugepages/hugepages-2048kB/free_hugepages"
RESV = "hugepages/hugepages-2048kB/resv_hugepages"


def at(region, page, minus_kb=0):
    """The address of huge page `page` of region, less minus_kb KiB."""
    kb = page * HP_MB * 1024 - minus_kb
    if kb == 0:
        return region
    return f"{region}+{kb // 1024}M" if kb % 1024 == 0 else f"{region}+{kb}K"


def size(pages, plus_kb=0):
    return f"{pages * HP_MB * 1024 + plus_kb}K" if plus_kb else f"{pages * HP_MB}M"


def free(n):
    return f"expect sysfs {FREE} {n}"


def write_fault(region, base=0):
    """One 8-byte store at the start of each of the NR pages, page i gets byte i+1."""
    return [f"P write {at(region, base + i)} 8 {i + 1}" for i in range(NR)]


def read_fault(region):
    return [f"P read {at(region, i)} 8" for i in range(NR)]


def read_back(region, base=0, zapped=()):
    """Each page's first 8 bytes: 0 where it was zapped, else its i+1."""
    return [f"P read {at(region, base + i)} 8 {0 if i in zapped else i + 1}" for i in range(NR)]


def invalid_args():
    # The mapping of NR + 2 pages loses its first and last page, so that
    # nothing is mapped on either side of the NR pages in the middle, which
    # start at W+2M.
    return [
        f"P mmap W {size(NR + 2)} rw private hugetlb=2M",
        f"P munmap W {size(1)}",
        f"P munmap {at('W', NR + 1)} {size(1)}",
        *write_fault("W", 1),
        free(POOL - NR),
        "# the start 4K below the mapping, in the hole",
        f"expect-error ENOMEM P madvise {at('W', 1, 4)} {size(NR)} dontneed",
        "# (beyond the selftest) the mapped part, its end rounded down to 9 huge pages, was zapped",
        free(POOL - 1),
        *read_back("W", 1, zapped=range(NR - 1)),
        "# (beyond the selftest) reading a zapped private page faults in a new, zeroed one",
        free(POOL - NR),
        "# the end 4K beyond the mapping, in the hole",
        f"expect-error ENOMEM P madvise {at('W', 1)} {size(NR, 4)} dontneed",
        "# (beyond the selftest) the mapped part, all 10 pages, was zapped",
        free(POOL),
        *read_back("W", 1, zapped=range(NR)),
        free(POOL - NR),
        f"P munmap {at('W', 1)} {size(NR)}",
        free(POOL),
    ]


def alignment():
    return [
        f"P mmap A {size(NR)} rw private hugetlb=2M",
        *write_fault("A"),
        free(POOL - NR),
        "# start not huge-page aligned",
        f"expect-error EINVAL P madvise A+4K {size(NR, -4)} dontneed",
        "# (beyond the selftest) nothing was zapped",
        free(POOL - NR),
        "# the end (9 pages and 4K) is rounded down to 9 pages: all but the last page are freed",
        f"P madvise A {size(NR - 1, 4)} dontneed",
        free(POOL - 1),
        *read_back("A", zapped=range(NR - 1)),
        "# (beyond the selftest) reading a zapped private page faults in a new, zeroed one",
        free(POOL - NR),
        f"P munmap A {size(NR)}",
        free(POOL),
    ]


def anon_private():
    return [
        f"P mmap A {size(NR)} rw private hugetlb=2M",
        *write_fault("A"),
        free(POOL - NR),
        f"P madvise A {size(NR)} dontneed",
        "# every page of the mapping is freed",
        free(POOL),
        f"P munmap A {size(NR)}",
    ]


def file_lines():
    return [f"file F {size(NR)} hugetlb=2M", free(POOL - NR)]


def private_file():
    return file_lines() + [
        f"P mmap A {size(NR)} rw private file=F",
        "# a read maps the file's pages: nothing is allocated",
        *read_fault("A"),
        free(POOL - NR),
        "# nothing private to free",
        f"P madvise A {size(NR)} dontneed",
        free(POOL - NR),
        "# a write copies each page into a private one",
        *write_fault("A"),
        free(POOL - 2 * NR),
        "# the private copies are freed",
        f"P madvise A {size(NR)} dontneed",
        free(POOL - NR),
        *write_fault("A"),
        free(POOL - 2 * NR),
        "# the hole punch frees the file's pages and, as hugetlbfs always has, the private copies too",
        f"punch-hole F 0 {size(NR)}",
        free(POOL),
        "# (beyond the selftest) the copies' reservations are back in the private mapping's map",
        f"expect sysfs {RESV} {NR}",
        f"P munmap A {size(NR)}",
        f"expect sysfs {RESV} 0",
    ]


def shared_file():
    return file_lines() + [
        f"P mmap A {size(NR)} rw shared file=F",
        "# a shared write uses the file's pages",
        *write_fault("A"),
        free(POOL - NR),
        "# the file's pages stay in the file",
        f"P madvise A {size(NR)} dontneed",
        free(POOL - NR),
        "# (beyond the selftest) their bytes too",
        *read_back("A"),
        "# MADV_REMOVE is a hole punch of the file: it frees them",
        f"P madvise A {size(NR)} remove",
        free(POOL),
        f"P munmap A {size(NR)}",
    ]


def shared_and_private_file():
    return file_lines() + [
        f"P mmap A {size(NR)} rw shared file=F",
        *write_fault("A"),
        free(POOL - NR),
        f"P mmap B {size(NR)} rw private file=F",
        "# a private read maps the file's pages",
        *read_fault("B"),
        free(POOL - NR),
        "# (beyond the selftest) which hold the shared writes",
        *read_back("B"),
        "# a private write allocates a copy of each",
        *[f"P write {at('B', i)} 8 {0x81 + i}" for i in range(NR)],
        free(POOL - 2 * NR),
        "# MADV_DONTNEED of the shared mapping frees nothing",
        f"P madvise A {size(NR)} dontneed",
        free(POOL - 2 * NR),
        "# that of the private one frees the copies",
        f"P madvise B {size(NR)} dontneed",
        free(POOL - NR),
        "# (beyond the selftest) the private mapping reads the file again",
        *read_back("B"),
        *[f"P write {at('B', i)} 8 {0x81 + i}" for i in range(NR)],
        free(POOL - 2 * NR),
        "# MADV_REMOVE of the shared mapping frees the file's pages and the private copies too",
        f"P madvise A {size(NR)} remove",
        free(POOL),
        f"P munmap A {size(NR)}",
        f"P munmap B {size(NR)}",
    ]


SECTIONS = [
    ("invalid-addr-and-length", "MADV_DONTNEED addr and length arguments: a range running into a hole fails",
     invalid_args),
    ("alignment", "MADV_DONTNEED alignment: unaligned start fails, the end is rounded down", alignment),
    ("anon-private", "MADV_DONTNEED on an anonymous private mapping", anon_private),
    ("private-file", "MADV_DONTNEED on a private mapping of a hugetlb file", private_file),
    ("shared-file", "MADV_DONTNEED on a shared mapping of a hugetlb file", shared_file),
    ("shared-and-private-file", "MADV_DONTNEED on shared and private mappings of one hugetlb file",
     shared_and_private_file),
]


def gen():
    out = ["# Generated by gen_hugetlb_madvise.py from tools/testing/selftests/mm/hugetlb-madvise.c.",
           "# Do not edit by hand: change the generator and run it again."]
    for i, (name, why, body) in enumerate(SECTIONS):
        out += ["", f"test hugetlb-madvise-{i + 1}-{name}", f"# [{i + 1}] {why}",
                f"sysfs hugepages/hugepages-2048kB/nr_hugepages {POOL}", "proc P"] + body()
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    replay_file.main(__doc__, "hugetlb_madvise.mms", gen)
