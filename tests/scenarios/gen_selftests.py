#!/usr/bin/env python3
"""Generates the replays of the kernel's cow.c, gup_longterm.c and
khugepaged.c selftests as .mms scenario files. The matrix is data, as the
selftests build it: memory types x test functions (x collapse contexts x
mTHP sizes for khugepaged.c). The generated files are committed beside it
so a reader sees the tests; the ctest scenario.generated_files checks that
they are what it writes (check_generated.py).

    ./gen_selftests.py             # writes cow.mms, gup_longterm.mms and khugepaged.mms here
    ./gen_selftests.py --out DIR   # ... into DIR instead
"""
import argparse
import os

K = 1024
THP_SIZES_KB = [16, 32, 64, 128, 256, 512, 1024, 2048]
HUGETLB_SIZES = [("2M", 2 * K * K, "2048kB"), ("1G", K * K * K, "1048576kB")]


def size(n):
    if n % (K * K * K) == 0:
        return f"{n // (K * K * K)}G"
    if n % (K * K) == 0:
        return f"{n // (K * K)}M"
    return f"{n // K}K"


def thp_settings(kb):
    """cow.c: the PMD-order control set to never and order(s) to always."""
    out = ["sysfs transparent_hugepage/hugepages-2048kB/enabled never"]
    out.append(f"sysfs transparent_hugepage/hugepages-{kb}kB/enabled always")
    return out


# ---- anonymous memory types (catalog 1.2). Each returns (setup lines, range
# size N, and whether it is hugetlb). The range starts at region A.

def populate_thp(n, kb):
    return thp_settings(kb) + [
        f"P mmap A {size(n)} rw private align={size(n)}",
        f"P madvise A {size(n)} hugepage",
        f"P write A {size(n)} 1",
        # cow.c requires the last subpage to be populated ("Did not get a THP populated")
        f"expect P A+{size(n - 4 * K)} order {(n // (4 * K)).bit_length() - 1}",
    ]


def anon_types():
    types = []
    base = ["P mmap A 4K rw private", "P madvise A 4K nohugepage", "P write A 4K 1"]
    types.append(("base", "base page", base, 4 * K, False))
    types.append(("base-swap", "swapped out base page",
                  ["swap 64M"] + base + ["P madvise A 4K pageout", "expect P A swapped yes"], 4 * K, False))
    for kb in THP_SIZES_KB:
        n = kb * K
        pop = populate_thp(n, kb)
        sfx = f"{kb}kB"
        if kb == 2048:
            types.append((f"thp-pmd-{sfx}", f"THP ({kb} kB)", pop + ["expect P A mapped pmd"], n, False))
            types.append((f"thp-pmd-swap-{sfx}", f"swapped-out THP ({kb} kB)",
                          ["swap 64M"] + pop + [f"P madvise A {size(n)} pageout", "expect P A swapped yes",
                                                f"expect P A+{size(n - 4 * K)} swapped yes"], n, False))
        pte = pop + ["P mprotect A+4K 4K r", "P mprotect A+4K 4K rw"]
        types.append((f"thp-pte-{sfx}", f"PTE-mapped THP ({kb} kB)", pte + ["expect P A mapped pte"], n, False))
        types.append((f"thp-pte-swap-{sfx}", f"swapped-out, PTE-mapped THP ({kb} kB)",
                      ["swap 64M"] + pte + [f"P madvise A {size(n)} pageout", "expect P A swapped yes"], n, False))
        single = pop + [f"P madvise A+4K {size(n - 4 * K)} dontneed"]
        types.append((f"thp-single-{sfx}", f"single PTE of THP ({kb} kB)", single, 4 * K, False))
        types.append((f"thp-single-swap-{sfx}", f"single PTE of swapped-out THP ({kb} kB)",
                      ["swap 64M"] + single + ["P madvise A 4K pageout", "expect P A swapped yes"], 4 * K, False))
        half = n // 2
        mremap = pop + [f"P mmap B {size(half)} none private",
                        f"P mremap A+{size(half)} {size(half)} {size(half)} M2 to=B"]
        types.append((f"thp-mremap-{sfx}", f"partially mremap()'ed THP ({kb} kB)", mremap, half, False))
        pshared = pop + [f"P madvise A+4K {size(n - 4 * K)} dontfork", "P fork Z", "Z exit",
                         f"P madvise A+4K {size(n - 4 * K)} dofork"]
        types.append((f"thp-pshared-{sfx}", f"partially shared THP ({kb} kB)", pshared, n, False))
    for name, n, kbdir in HUGETLB_SIZES:
        # One huge page for the test, one spare (cow.c's probe), one more for a CoW copy.
        setup = [f"sysfs hugepages/hugepages-{kbdir}/nr_hugepages 3",
                 f"P mmap A {name} rw private hugetlb={name}", f"P write A {name} 1"]
        types.append((f"hugetlb-{kbdir}", f"hugetlb ({n // K} kB)", setup, n, True))
    return types


def pages(n):
    return n // (4 * K)


# ---- anonymous test functions (catalog 1.4). Each returns the body lines for
# a range of N bytes at A; `ht` marks hugetlb, where the vmsplice cases XFAIL.

def vmsplice_n(n):
    return min(16, pages(n))


def f_basic_fork(n, ht, mprotect=False):
    body = ["P fork C"]
    if mprotect:
        body += [f"P mprotect A {size(n)} r", f"P mprotect A {size(n)} rw"]
    body += [f"P write A {size(n)} 0xff", f"C read A {size(n)} 1", f"P read A {size(n)} 0xff", "C exit"]
    return body


def xfail_if(ht):
    return ["xfail hugetlb reuses by mapcount, not refcount (cow.c: harder to fix and nobody really cares)"] if ht else []


def f_vmsplice_child(n, ht, mprotect=False):
    v = vmsplice_n(n)
    body = xfail_if(ht) + ["P fork C", f"C gup H A {v} get,fast", f"expect H {v}", f"C munmap A {size(n)}"]
    if mprotect:
        body += [f"P mprotect A {size(n)} r", f"P mprotect A {size(n)} rw"]
    body += [f"P write A {size(n)} 0xff", f"H read 0 {size(v * 4 * K)} 1", "unpin H", "C exit"]
    return body


def f_vmsplice_before_fork(n, ht):
    v = vmsplice_n(n)
    return xfail_if(ht) + [f"P gup H A {v} get,fast", f"expect H {v}", "P fork C", f"P munmap A {size(n)}",
                           f"C write A {size(n)} 0xff", "C exit", f"H read 0 {size(v * 4 * K)} 1", "unpin H"]


def f_vmsplice_after_fork(n, ht):
    v = vmsplice_n(n)
    return xfail_if(ht) + ["P fork C", f"P gup H A {v} get,fast", f"expect H {v}", f"P munmap A {size(n)}",
                           f"C write A {size(n)} 0xff", "C exit", f"H read 0 {size(v * 4 * K)} 1", "unpin H"]


def f_iouring_ro(n, ht):
    return [f"P gup H A {pages(n)} pin,fast,write,longterm", f"expect H {pages(n)}", f"P mprotect A {size(n)} r",
            "P clear-soft-dirty", f"P mprotect A {size(n)} rw", f"P write A {size(n)} 0xff",
            f"H read 0 {size(n)} 0xff", "unpin H"]


def f_iouring_fork(n, ht):
    return [f"P gup H A {pages(n)} pin,fast,write,longterm", f"expect H {pages(n)}", "P fork C",
            f"P write A {size(n)} 0xff", f"H read 0 {size(n)} 0xff", "unpin H", f"C read A {size(n)} 1", "C exit"]


def ropin(n, fast):
    flags = "pin,fast,longterm" if fast else "pin,longterm"
    return [f"P gup H A {pages(n)} {flags}", f"expect H {pages(n)}", f"P write A {size(n)} 0xff",
            f"H read 0 {size(n)} 0xff", "unpin H"]


def f_ropin_shared(n, ht, fast=False):
    return ["P fork C"] + ropin(n, fast) + [f"C read A {size(n)} 1", "C exit"]


def f_ropin_prevshared(n, ht, fast=False):
    return ["P fork C", "C exit"] + ropin(n, fast)


def f_ropin_excl(n, ht, fast=False):
    return [f"P mprotect A {size(n)} r", "P clear-soft-dirty", f"P mprotect A {size(n)} rw"] + ropin(n, fast)


ANON_FUNCS = [
    ("basic-fork", "Basic COW after fork()", lambda n, ht: f_basic_fork(n, ht)),
    ("basic-fork-mprotect", "Basic COW after fork() with mprotect() optimization", lambda n, ht: f_basic_fork(n, ht, True)),
    ("vmsplice-child", "vmsplice() + unmap in child", lambda n, ht: f_vmsplice_child(n, ht)),
    ("vmsplice-child-mprotect", "vmsplice() + unmap in child with mprotect() optimization",
     lambda n, ht: f_vmsplice_child(n, ht, True)),
    ("vmsplice-before-fork", "vmsplice() before fork(), unmap in parent after fork()", f_vmsplice_before_fork),
    ("vmsplice-after-fork", "vmsplice() + unmap in parent after fork()", f_vmsplice_after_fork),
    ("iouring-ro", "R/O-mapping a page registered as iouring fixed buffer", f_iouring_ro),
    ("iouring-fork", "fork() with an iouring fixed buffer", f_iouring_fork),
    ("ropin-shared", "R/O GUP pin on R/O-mapped shared page", lambda n, ht: f_ropin_shared(n, ht)),
    ("ropin-fast-shared", "R/O GUP-fast pin on R/O-mapped shared page", lambda n, ht: f_ropin_shared(n, ht, True)),
    ("ropin-prevshared", "R/O GUP pin on R/O-mapped previously-shared page", lambda n, ht: f_ropin_prevshared(n, ht)),
    ("ropin-fast-prevshared", "R/O GUP-fast pin on R/O-mapped previously-shared page",
     lambda n, ht: f_ropin_prevshared(n, ht, True)),
    ("ropin-excl", "R/O GUP pin on R/O-mapped exclusive page", lambda n, ht: f_ropin_excl(n, ht)),
    ("ropin-fast-excl", "R/O GUP-fast pin on R/O-mapped exclusive page", lambda n, ht: f_ropin_excl(n, ht, True)),
]

# ---- the anon-THP collapse group (catalog 1.5)

# After every MADV_COLLAPSE: the parent maps the range by a PMD and still
# reads its data (cow.c checks only the child, at the end).
COLLAPSED = ["expect P A mapped pmd", "P read A 2M 1"]

COLLAPSE = [
    ("collapse-before-fork", "Basic COW after fork() when collapsing before fork()",
     ["P madvise A 2M collapse"] + COLLAPSED + ["P fork C", "P write A 2M 0xff", "C read A 2M 1", "C exit"]),
    ("collapse-fully-shared", "Basic COW after fork() when collapsing after fork() (fully shared)",
     ["P fork C", "P madvise A 2M collapse"] + COLLAPSED +
     ["expect C A mapped pte", "P write A 2M 0xff", "C read A 2M 1", "C exit"]),
    ("collapse-lower-shared", "Basic COW after fork() when collapsing after fork() (lower shared)",
     ["P madvise A+1M 1M dontfork", "P fork C", "P madvise A 2M dofork", "P madvise A 2M collapse"] + COLLAPSED +
     ["P write A 2M 0xff", "C read A 1M 1", "C exit"]),
    ("collapse-upper-shared", "Basic COW after fork() when collapsing after fork() (upper shared)",
     ["P madvise A 1M dontfork", "P fork C", "P madvise A 2M dofork", "P madvise A 2M collapse"] + COLLAPSED +
     ["P write A 2M 0xff", "C read A+1M 1M 1", "C exit"]),
]

# ---- non-anonymous memory types and functions (catalog 1.6, 1.7)


def nonanon_types():
    t = [("zero", "shared zeropage", ["P mmap M 4K rw private", "P mmap S 4K r private", "P read M 4K 0",
                                      "P read S 4K 0", "expect P M zero yes"], 4 * K, False),
         ("memfd", "memfd", ["file F 4K", "P mmap M 4K rw private file=F", "P mmap S 4K r shared file=F",
                             "P read M 4K 0", "P read S 4K 0"], 4 * K, False),
         ("tmpfile", "tmpfile", ["file F 4K fs=ext4", "P mmap M 4K rw private file=F",
                                 "P mmap S 4K r shared file=F", "P read M 4K 0", "P read S 4K 0"], 4 * K, False),
         ("hugezero", "huge zeropage", ["P mmap M 2M rw private align=2M", "P madvise M 2M hugepage",
                                        "P mmap S 2M r private align=2M", "P madvise S 2M hugepage",
                                        "P read M 2M 0", "P read S 2M 0", "expect P M mapped pmd",
                                        "expect P M zero yes"], 2 * K * K, False)]
    for name, n, kbdir in HUGETLB_SIZES:
        t.append((f"memfd-hugetlb-{kbdir}", f"memfd hugetlb ({n // K} kB)",
                  [f"sysfs hugepages/hugepages-{kbdir}/nr_hugepages 3", f"file F {name} hugetlb={name}",
                   f"P mmap M {name} rw private file=F", f"P mmap S {name} r shared file=F",
                   f"P read M {name} 0", f"P read S {name} 0"], n, True))
    return t


NONANON_FUNCS = [
    ("basic", "Basic COW", lambda n: [f"P write M {size(n)} 0xff", f"P read S {size(n)} 0"]),
    ("ropin", "R/O longterm GUP pin",
     lambda n: [f"P gup H M {pages(n)} pin,longterm", f"expect H {pages(n)}", f"P write M {size(n)} 0xff",
                f"H read 0 {size(n)} 0xff", "unpin H", f"P read S {size(n)} 0"]),
    ("ropin-fast", "R/O longterm GUP-fast pin",
     lambda n: [f"P gup H M {pages(n)} pin,fast,longterm", f"expect H {pages(n)}", f"P write M {size(n)} 0xff",
                f"H read 0 {size(n)} 0xff", "unpin H", f"P read S {size(n)} 0"]),
]


def emit_test(out, name, desc, lines):
    out.append(f"test {name}")
    out.append(f"# [RUN] {desc}")
    out.extend(lines)
    out.append("")


def gen_cow():
    out = ["# Generated by gen_selftests.py from the catalog of tools/testing/selftests/mm/cow.c.",
           "# Do not edit by hand: change the generator and run it again.", "", "proc P", ""]
    for fid, fdesc, fn in ANON_FUNCS:
        for tid, tdesc, setup, n, ht in anon_types():
            emit_test(out, f"cow-anon-{fid}-{tid}", f"{fdesc} ... with {tdesc}", setup + fn(n, ht))
    for cid, cdesc, body in COLLAPSE:
        setup = populate_thp(2 * K * K, 2048) + ["P mprotect A+4K 4K r", "P mprotect A+4K 4K rw"]
        emit_test(out, f"cow-thp-{cid}", cdesc, setup + body)
    for fid, fdesc, fn in NONANON_FUNCS:
        for tid, tdesc, setup, n, ht in nonanon_types():
            emit_test(out, f"cow-nonanon-{fid}-{tid}", f"{fdesc} ... with {tdesc}", setup + fn(n))
    return "\n".join(out)


# ---- gup_longterm.c (catalog 2)

LT_BACKINGS = [("memfd", "memfd", "file F 4K", "4K", 1, True),
               ("tmpfile", "tmpfile", "file F 4K fs=ext4", "4K", 1, False),
               ("localtmp-xfs", "local tmpfile (xfs)", "file F 4K fs=xfs", "4K", 1, False),
               ("localtmp-btrfs", "local tmpfile (btrfs)", "file F 4K fs=btrfs", "4K", 1, False),
               ("hugetlb-2048kB", "memfd hugetlb (2048 kB)", "file F 2M hugetlb=2M", "2M", 512, True),
               ("hugetlb-1048576kB", "memfd hugetlb (1048576 kB)", "file F 1G hugetlb=1G", "1G", 262144, True)]

LT_CASES = [  # id, description, shared, write, flags
    ("shared-rw", "R/W longterm GUP pin in MAP_SHARED file mapping", True, True, "pin,write,longterm"),
    ("shared-rw-fast", "R/W longterm GUP-fast pin in MAP_SHARED file mapping", True, True, "pin,fast,write,longterm"),
    ("shared-ro", "R/O longterm GUP pin in MAP_SHARED file mapping", True, False, "pin,longterm"),
    ("shared-ro-fast", "R/O longterm GUP-fast pin in MAP_SHARED file mapping", True, False, "pin,fast,longterm"),
    ("private-rw", "R/W longterm GUP pin in MAP_PRIVATE file mapping", False, True, "pin,write,longterm"),
    ("private-rw-fast", "R/W longterm GUP-fast pin in MAP_PRIVATE file mapping", False, True, "pin,fast,write,longterm"),
    ("private-ro", "R/O longterm GUP pin in MAP_PRIVATE file mapping", False, False, "pin,longterm"),
    ("private-ro-fast", "R/O longterm GUP-fast pin in MAP_PRIVATE file mapping", False, False, "pin,fast,longterm"),
    ("shared-iouring", "io_uring fixed buffer with MAP_SHARED file mapping", True, True, "pin,fast,write,longterm"),
    ("private-iouring", "io_uring fixed buffer with MAP_PRIVATE file mapping", False, True, "pin,fast,write,longterm"),
]


def gen_gup_longterm():
    out = ["# Generated by gen_selftests.py from the catalog of tools/testing/selftests/mm/gup_longterm.c.",
           "# Do not edit by hand: change the generator and run it again.", "", "proc P", ""]
    for cid, cdesc, shared, write, flags in LT_CASES:
        for bid, bdesc, file_line, sz, npages, supports_rw in LT_BACKINGS:
            lines = []
            if "hugetlb" in bid:
                kbdir = "2048kB" if sz == "2M" else "1048576kB"
                lines.append(f"sysfs hugepages/hugepages-{kbdir}/nr_hugepages 3")
            lines += [file_line, f"P mmap A {sz} rw {'shared' if shared else 'private'} file=F", f"P write A {sz} 0"]
            if not write:
                lines.append(f"P mprotect A {sz} r")  # newer gup_longterm: cover more unsharing decisions
            lines.append(f"P gup H A {npages} {flags}")
            works = not (shared and write and not supports_rw)
            lines.append(f"expect H {npages}" if works else "expect H -EFAULT")
            lines.append("unpin H")
            emit_test(out, f"gup-longterm-{cid}-{bid}", f"{cdesc} ... with {bdesc}", lines)
    return "\n".join(out)


# ---- khugepaged.c (catalog 4): anonymous collapse in two contexts ----
#
# khugepaged.c's harness: mem_ops (anon, file, shmem) x collapse contexts
# (khugepaged: MADV_HUGEPAGE, wait for two full scans, MADV_NOHUGEPAGE;
# madvise: THP "never", MADV_HUGEPAGE to clear NOHUGEPAGE, MADV_COLLAPSE)
# x the test functions, in the forms run_vmtests.sh runs (no -s, -s 2, -s 4:
# anonymous faults allocate mTHPs of that order). Its check_huge() reads
# AnonHugePages from smaps; here each PMD of the range is checked. Memory
# is a per-256K stamp (validate_memory checks one per page).

PMD = 2 * K * K
PAGE = 4 * K
HPAGE_PMD_NR = 512
STAMP_PAGES = 64  # pages that share one stamp byte


def stamp(page):
    return 1 + (page // STAMP_PAGES) % 200


def stamp_runs(start, end):
    """[(offset, length, byte)] covering [start, end) by runs of one stamp."""
    runs = []
    off = start
    while off < end:
        nxt = min(end, (off // PAGE // STAMP_PAGES + 1) * STAMP_PAGES * PAGE)
        runs.append((off, nxt - off, stamp(off // PAGE)))
        off = nxt
    return runs


def at(region, off):
    return f"{region}+{size(off)}" if off else region


def khp_fill(start, end, who="P", region="A"):
    """fill_memory(): one store per page of [start, end), the page's stamp."""
    return [f"{who} write {at(region, o)} {size(n)} {b}" for o, n, b in stamp_runs(start, end)]


def khp_validate(start, end, who="P", region="A"):
    return [f"{who} read {at(region, o)} {size(n)} {b}" for o, n, b in stamp_runs(start, end)]


def check_huge(nr, probe, who="P", region="A"):
    """check_huge(p, nr): nr PMD mappings; with nr 0, `probe` is the offset of
    a page known to be PTE-mapped (None: the range is empty)."""
    if nr:
        return [f"expect {who} {at(region, i * PMD)} mapped pmd" for i in range(nr)]
    if probe is None:
        return [f"expect {who} {region} mapped none"]
    return [f"expect {who} {at(region, probe)} mapped pte"]


class Mem:
    """khugepaged.c's mem_ops: anon (a private anonymous mapping), shmem (a
    memfd: memfd_create, ftruncate to the size, a shared mapping; pages
    appear on first write, the memfd's page cache is what collapses) or file
    (file_ops: a regular file written, opened again O_RDONLY, mapped
    PROT_READ|PROT_EXEC MAP_PRIVATE and its page cache dropped; its fault is
    MADV_POPULATE_READ). The language writes no file content: the runner's
    file holds zeros, so a file's pages read 0 where the test reads its
    stamps. Needs CONFIG_READ_ONLY_THP_FOR_FS (tune mm.read_only_thp_for_fs
    on; the host backend skips the test where its kernel lacks it)."""

    def __init__(self, name):
        self.name = name

    def setup(self, nr_bytes):
        if self.name == "anon":
            return [f"P mmap A {size(nr_bytes)} rw private align=2M"]
        if self.name == "file":
            return ["tune mm.read_only_thp_for_fs on", "tune mm.read_ahead_kb 0", f"file F {size(nr_bytes)} fs=ext4 ro uncached",
                    f"P mmap A {size(nr_bytes)} rx private file=F align=2M"]
        return ["file F 0", f"truncate F {size(nr_bytes)}", f"P mmap A {size(nr_bytes)} rw shared file=F align=2M"]

    def fill(self, start, end, who="P"):
        """ops->fault (fill_memory, or MADV_POPULATE_READ for a file)."""
        if self.name == "file":
            return [f"{who} madvise {at('A', start)} {size(end - start)} populate_read"]
        return khp_fill(start, end, who)

    def validate(self, start, end, who="P"):
        if self.name == "file":
            return [f"{who} read {at('A', start)} {size(end - start)} 0"]
        return khp_validate(start, end, who)


class Ctx:
    def __init__(self, name, enforce):
        self.name, self.enforce = name, enforce

    def collapse(self, nr, expect, probe, who="P", sanity=True, errno="EINVAL", mem=None):
        """c->collapse(msg, p, nr, ops, expect) on region A."""
        length = size(nr * PMD)
        anon = mem is None or mem.name == "anon"
        if self.name == "khugepaged":
            out = [f"{who} madvise A {length} hugepage", "khugepaged 2", f"{who} madvise A {length} nohugepage"]
            if mem is not None and mem.name == "file":
                # A file VMA is registered by MADV_HUGEPAGE (its check reads
                # the new flags), so khugepaged collapses the page cache and
                # retracts the page tables; ops->fault() refaults, but
                # MADV_NOHUGEPAGE keeps do_set_pmd() from mapping the THP by
                # a PMD: PTEs map it, where check_huge() wants FilePmdMapped.
                # The folio's order shows whether it collapsed.
                out += mem.fill(0, nr * PMD, who)
                want = 9 if expect else 0
                return out + [l for i in range(nr) for l in (f"expect {who} {at('A', i * PMD)} mapped pte",
                                                              f"expect {who} {at('A', i * PMD)} order {want}")]
            if not anon:
                # khugepaged only retracts the page tables of file and shmem
                # memory, and ops->fault() refaults the range (fill_memory
                # writes). Here khugepaged collapses nothing (the mm is not
                # registered: see k_madvise_retracted_page_tables), and had
                # it collapsed, MADV_NOHUGEPAGE would keep do_set_pmd() from
                # mapping the THP by a PMD: either way the range is mapped by
                # PTEs, where khugepaged.c's check_huge() wants
                # ShmemPmdMapped (docs/NOTES.md, "Issue 30: shmem collapse").
                out += khp_fill(0, nr * PMD, who)
                return out + [f"expect {who} {at('A', i * PMD)} mapped pte" for i in range(nr)]
            return out + check_huge(nr if expect else 0, probe, who)
        # __madvise_collapse: THP "never" (and shmem_enabled "never") proves
        # MADV_COLLAPSE ignores them.
        call = f"{who} madvise A {length} collapse"
        return (["sysfs transparent_hugepage/enabled never", "sysfs transparent_hugepage/shmem_enabled never",
                 f"{who} madvise A {length} hugepage",
                 call if expect else f"expect-error {errno} {call}"] +
                check_huge(nr if expect else 0, probe, who) +
                ["sysfs transparent_hugepage/enabled madvise", "sysfs transparent_hugepage/shmem_enabled advise"])


KHP_CTXS = [Ctx("khugepaged", True), Ctx("madvise", False)]


def alloc_hpage(m=Mem("anon")):
    """alloc_hpage(): a PMD THP made by MADV_COLLAPSE, then MADV_HUGEPAGE."""
    return (m.setup(PMD) + m.fill(0, PMD) +
            ["P madvise A 2M collapse", "expect P A mapped pmd", "P madvise A 2M hugepage"])


def k_collapse_full(c, order, m=Mem("anon")):
    return m.setup(4 * PMD) + m.fill(0, 4 * PMD) + c.collapse(4, True, 0, mem=m) + m.validate(0, 4 * PMD)


def k_collapse_empty(c, order):
    # No fault: the VMA has no anon_vma, so MADV_COLLAPSE finds it ineligible.
    return ["P mmap A 2M rw private align=2M"] + c.collapse(1, False, None)


def k_collapse_single_pte_entry(c, order, m=Mem("anon")):
    return m.setup(PMD) + m.fill(0, PAGE) + c.collapse(1, True, 0, mem=m) + m.validate(0, PAGE)


def k_collapse_max_ptes_none(c, order, m=Mem("anon")):
    # For a file, khugepaged counts the pages in the page cache: the file's
    # was dropped, and the model reads no more than the fault asks (no
    # readahead), so 255 cached pages stay below the limit of 256.
    max_ptes_none = HPAGE_PMD_NR // 2
    fault_nr = 1 << order
    first = (HPAGE_PMD_NR - max_ptes_none - fault_nr) * PAGE
    out = [f"sysfs transparent_hugepage/khugepaged/max_ptes_none {max_ptes_none}"] + m.setup(PMD)
    out += m.fill(0, first) + c.collapse(1, not c.enforce, 0, mem=m) + m.validate(0, first)
    if c.enforce:
        second = (HPAGE_PMD_NR - max_ptes_none) * PAGE
        out += m.fill(0, second) + c.collapse(1, True, 0, mem=m) + m.validate(0, second)
    return out + ["sysfs transparent_hugepage/khugepaged/max_ptes_none 511"]


def swapped(n):
    """check_swap(p, n pages): the first n pages are swapped out, the next not."""
    return ["expect P A swapped yes", f"expect P {at('A', (n - 1) * PAGE)} swapped yes",
            f"expect P {at('A', n * PAGE)} swapped no"]


def k_collapse_swapin_single_pte(c, order):
    return (["swap 64M", "P mmap A 2M rw private align=2M"] + khp_fill(0, PMD) +
            ["P madvise A 4K pageout"] + swapped(1) + c.collapse(1, True, PAGE) + khp_validate(0, PMD))


def k_collapse_max_ptes_swap(c, order):
    max_ptes_swap = 64
    out = ["swap 64M", "P mmap A 2M rw private align=2M"] + khp_fill(0, PMD)
    out += [f"P madvise A {size((max_ptes_swap + 1) * PAGE)} pageout"] + swapped(max_ptes_swap + 1)
    out += c.collapse(1, not c.enforce, (max_ptes_swap + 1) * PAGE) + khp_validate(0, PMD)
    if c.enforce:
        out += khp_fill(0, PMD) + [f"P madvise A {size(max_ptes_swap * PAGE)} pageout"] + swapped(max_ptes_swap)
        out += c.collapse(1, True, 0) + khp_validate(0, PMD)
    return out


def k_collapse_single_pte_entry_compound(c, order, m=Mem("anon")):
    # A file THP's PMD is not split into PTEs by the partial MADV_DONTNEED
    # (a page-cache folio is refaulted): the whole 2M is unmapped.
    probe = 0 if m.name == "anon" else None
    return (alloc_hpage(m) + ["P madvise A 2M nohugepage", "P madvise A+4K 2044K dontneed"] + check_huge(0, probe) +
            c.collapse(1, True, 0, mem=m) + m.validate(0, PAGE))


def k_collapse_full_of_compound(c, order, m=Mem("anon")):
    # For shmem, MADV_NOHUGEPAGE's VMA split clears the file PMD (a file
    # THP is refaulted, not remapped by PTEs): check_huge(p, 0) sees none.
    probe = 0 if m.name == "anon" else None
    return (alloc_hpage(m) + ["P madvise A 4K nohugepage", "P madvise A 2M nohugepage"] + check_huge(0, probe) +
            c.collapse(1, True, 0, mem=m) + m.validate(0, PMD))


def k_collapse_compound_extreme(c, order):
    """A table whose 512 PTEs map one page each of 512 different THPs, built
    with two mremap()s per THP. BASE_ADDR is X+2M of a reservation X (the
    language has no fixed-address mmap): the pages gather below BASE."""
    out = ["P mmap X 8M rw private align=2M"]
    for i in range(HPAGE_PMD_NR):
        out += ["P madvise X+2M 2M hugepage", "P write X+2M 2M 1", "expect P X+2M mapped pmd",
                "P madvise X+2M 2M nohugepage",
                f"P mremap {at('X', PMD - i * PAGE)} {size(i * PAGE + PMD)} {size((i + 1) * PAGE)} T to=X+6M",
                f"P mremap X+6M {size((i + 1) * PAGE)} {size((i + 1) * PAGE + PMD)} T to={at('X', PMD - (i + 1) * PAGE)}"]
    # ops->cleanup_area(BASE_ADDR, 2M); p is BASE_ADDR - 2M: X.
    out += ["P munmap X+2M 2M", "P mremap X 2M 2M A"]
    out += khp_fill(0, PMD) + check_huge(0, 0) + c.collapse(1, True, 0) + khp_validate(0, PMD)
    return out


def k_collapse_fork(c, order):
    out = ["P mmap A 2M rw private align=2M"] + khp_fill(0, PAGE) + check_huge(0, 0)
    out += ["P fork C"] + check_huge(0, 0, "C") + khp_fill(PAGE, 2 * PAGE, "C")
    out += c.collapse(1, True, 0, "C") + khp_validate(0, PAGE, "C") + ["C exit"]
    return out + check_huge(0, 0) + khp_validate(0, PAGE)


def k_collapse_fork_compound(c, order):
    out = alloc_hpage() + ["P fork C"] + check_huge(1, 0, "C")
    out += ["C madvise A 4K nohugepage", "C madvise A 2M nohugepage"] + check_huge(0, 0, "C") + khp_fill(0, PAGE, "C")
    out += [f"sysfs transparent_hugepage/khugepaged/max_ptes_shared {HPAGE_PMD_NR - 1}"]
    out += c.collapse(1, True, 0, "C") + ["sysfs transparent_hugepage/khugepaged/max_ptes_shared 256"]
    out += khp_validate(0, PMD, "C") + ["C exit"]
    return out + check_huge(1, 0) + khp_validate(0, PMD)


def k_collapse_max_ptes_shared(c, order):
    max_ptes_shared = 256
    out = alloc_hpage() + ["P fork C"] + check_huge(1, 0, "C")
    cow = HPAGE_PMD_NR - max_ptes_shared - 1
    out += khp_fill(0, cow * PAGE, "C") + check_huge(0, 0, "C") + c.collapse(1, not c.enforce, 0, "C")
    if c.enforce:
        out += khp_fill(0, (cow + 1) * PAGE, "C") + check_huge(0, 0, "C") + c.collapse(1, True, 0, "C")
    out += khp_validate(0, PMD, "C") + ["C exit"]
    return out + check_huge(1, 0) + khp_validate(0, PMD)


def k_madvise_collapse_existing_thps(c, order, m=Mem("anon")):
    out = m.setup(PMD) + m.fill(0, PMD) + c.collapse(1, True, 0, mem=m) + m.validate(0, PMD)
    # __madvise_collapse directly: the range is PMD-mapped already.
    out += ["sysfs transparent_hugepage/enabled never", "sysfs transparent_hugepage/shmem_enabled never",
            "P madvise A 2M hugepage", "P madvise A 2M collapse", "expect P A mapped pmd",
            "sysfs transparent_hugepage/enabled madvise", "sysfs transparent_hugepage/shmem_enabled advise"]
    return out + m.validate(0, PMD)


def k_madvise_retracted_page_tables(c, order, m=Mem("shmem")):
    """wait_for_scan() ("let khugepaged collapse and leave pmd cleared"),
    then MADV_COLLAPSE installs the PMD from the page cache. wait_for_scan()
    checks nothing, and here khugepaged collapses nothing: MADV_HUGEPAGE
    registers the mm only if the VMA was eligible with its flags from before
    the call (under shmem_enabled "advise" it was not), and in a process of
    its own no earlier test registered it. MADV_COLLAPSE then collapses the
    PTE-mapped pages itself. A file VMA is registered (its check reads the
    new flags): khugepaged collapses it and retracts the page table, as the
    test means, and MADV_COLLAPSE maps the page cache's THP."""
    out = m.setup(PMD) + m.fill(0, PMD)
    left = "none" if m.name == "file" else "pte"
    out += ["P madvise A 2M hugepage", "khugepaged 2", "P madvise A 2M nohugepage", f"expect P A mapped {left}"]
    return out + c.collapse(1, True, 0, mem=m) + m.validate(0, PMD)


# (function, description, contexts, memory types) in khugepaged.c's main() order.
KHP_TESTS = [
    ("collapse_full", "Collapse multiple fully populated PTE table", "all", "anon,file,shmem", k_collapse_full),
    ("collapse_empty", "Do not collapse empty PTE table", "all", "anon", k_collapse_empty),
    ("collapse_single_pte_entry", "Collapse PTE table with single PTE entry present", "all", "anon,file,shmem",
     k_collapse_single_pte_entry),
    ("collapse_max_ptes_none", "Maybe collapse with max_ptes_none exceeded", "all", "anon,file",
     k_collapse_max_ptes_none),
    ("collapse_single_pte_entry_compound", "Collapse PTE table with single PTE mapping compound page", "all",
     "anon,file", k_collapse_single_pte_entry_compound),
    ("collapse_full_of_compound", "Collapse PTE table full of compound pages", "all", "anon,file,shmem",
     k_collapse_full_of_compound),
    ("collapse_compound_extreme", "Collapse PTE table full of different compound pages", "all", "anon",
     k_collapse_compound_extreme),
    ("collapse_swapin_single_pte", "Collapse with swapping in single PTE entry", "all", "anon",
     k_collapse_swapin_single_pte),
    ("collapse_max_ptes_swap", "Maybe collapse with max_ptes_swap exceeded", "all", "anon", k_collapse_max_ptes_swap),
    ("collapse_fork", "Collapse PTE table with single page shared with parent process", "all", "anon",
     k_collapse_fork),
    ("collapse_fork_compound", "Collapse PTE table full of compound pages in child", "all", "anon",
     k_collapse_fork_compound),
    ("collapse_max_ptes_shared", "Maybe collapse with max_ptes_shared exceeded", "all", "anon",
     k_collapse_max_ptes_shared),
    ("madvise_collapse_existing_thps", "Re-collapse PMD-mapped hugepage", "madvise", "anon,file,shmem",
     k_madvise_collapse_existing_thps),
    ("madvise_retracted_page_tables", "Install huge PMD from page cache", "madvise", "file,shmem",
     k_madvise_retracted_page_tables),
]

# run_vmtests.sh's forms: (suffix, anon mTHP order of -s, memory types run).
KHP_FORMS = [("", 0, ("anon", "file", "shmem")), ("-s2", 2, ("anon",)), ("-s4", 4, ("anon", "shmem"))]


def gen_khugepaged():
    out = ["# Generated by gen_selftests.py from tools/testing/selftests/mm/khugepaged.c.",
           "# Do not edit by hand: change the generator and run it again.", "",
           "# khugepaged.c's default_settings (THP enabled=madvise and the PMD size",
           "# inherit are the model's defaults; defrag it has not). The file cases",
           "# need CONFIG_READ_ONLY_THP_FOR_FS, which this machine's kernel lacks:",
           "# they run on the model with tune mm.read_only_thp_for_fs on and skip on",
           "# a host without it, with the device's read_ahead_kb 0 as khugepaged.c",
           "# sets it (a fault reads only its own page: max_ptes_none counts them).",
           "proc P", "sysfs transparent_hugepage/use_zero_page 0", "sysfs transparent_hugepage/shmem_enabled advise",
           "sysfs transparent_hugepage/khugepaged/defrag 1",
           "sysfs transparent_hugepage/khugepaged/alloc_sleep_millisecs 10",
           "sysfs transparent_hugepage/khugepaged/scan_sleep_millisecs 10",
           "sysfs transparent_hugepage/khugepaged/max_ptes_none 511",
           "sysfs transparent_hugepage/khugepaged/max_ptes_swap 64",
           "sysfs transparent_hugepage/khugepaged/max_ptes_shared 256",
           "sysfs transparent_hugepage/khugepaged/pages_to_scan 4096", ""]
    for sfx, order, mems in KHP_FORMS:
        # hugepages[anon_order] = always (-s ORDER), and shmem_hugepages too
        # (which governs shared anonymous memory only: a memfd's faults stay
        # order 0); order 0 has no control.
        form = [f"sysfs transparent_hugepage/hugepages-{(4 << order)}kB/enabled always"] if order else []
        shmem_form = form + [f"sysfs transparent_hugepage/hugepages-{(4 << order)}kB/shmem_enabled always"] if order else []
        flag = f" -s {order}" if order else ""
        if "anon" in mems:
            emit_test(out, f"khugepaged-alloc-at-fault{sfx}", f"alloc_at_fault (khugepaged{flag})",
                      form + ["sysfs transparent_hugepage/enabled always", "P mmap A 2M rw private align=2M",
                              "P write A 4K 1", "expect P A mapped pmd", "sysfs transparent_hugepage/enabled madvise",
                              "P madvise A 4K dontneed", "expect P A+4K mapped pte"])
        for fn, desc, ctxs, tmems, body in KHP_TESTS:
            for c in KHP_CTXS:
                if ctxs != "all" and ctxs != c.name:
                    continue
                for mem in tmems.split(","):
                    if mem not in mems:
                        continue
                    name = f"khugepaged-{c.name}-{mem}-{fn.replace('_', '-')}{sfx}"
                    title = f"{fn} ({c.name}:{mem}{flag}): {desc}"
                    if mem == "file":
                        emit_test(out, name, title, body(c, order, Mem("file")))
                    elif mem == "shmem":
                        emit_test(out, name, title, shmem_form + body(c, order, Mem("shmem")))
                    else:
                        emit_test(out, name, title, form + body(c, order))
    return "\n".join(out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="directory to write the .mms files into (default: this script's)")
    args = ap.parse_args()
    for name, gen in (("cow.mms", gen_cow), ("gup_longterm.mms", gen_gup_longterm), ("khugepaged.mms", gen_khugepaged)):
        with open(os.path.join(args.out, name), "w") as f:
            f.write(gen())
