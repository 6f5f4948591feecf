#!/usr/bin/env python3
"""Generates the replay of the kernel's mremap_test.c selftest (as of v6.18,
with the v6.17 multi-VMA tests) as mremap_test.mms: the 15 move tests of
its table, then its functional tests (expand merge, expand merge offset,
move within range, move 1MB from start, shrink multiple VMAs, move
multiple VMAs, move multiple VMAs split, move multiple invalid VMAs), one
test each: 24 of the selftest's 29 cases.

How the selftest's steps are written here:
- Addresses. The selftest finds its source by trying MAP_FIXED_NOREPLACE
  at multiples of the source alignment above mmap_min_addr + 40MB until the
  address is aligned to it but not to twice it, and its destination from
  the source's end, rounded to the destination alignment and moved to an
  odd multiple of it. Here a PROT_NONE window aligned to twice the source
  alignment (at least 2MB, which makes the source's offset in its PMD the
  one the selftest gets with mmap_min_addr 4096) is mapped and unmapped,
  and both addresses are offsets in it, computed with the selftest's rule;
  the mappings are MAP_SHARED anonymous as the selftest's are.
- Data. The selftest copies bytes of a random buffer to the source (the
  first 4MB at most: its default threshold) and compares the destination
  with memcmp. Here the same range is written in chunks (at most 64, at
  least a page each), chunk i holding byte i+1, and each chunk is read back
  with its byte: a page that lands anywhere else reads another byte. The
  40MB destination preamble gets bytes 0x81.. the same way. The functional
  tests' random pages are one byte per page (or per 64K chunk).
- /proc/self/maps. mremap expand merge (offset) asserts that the three
  pages are one VMA after the expansion; here that is a resize of the
  whole 12K to 16K, which the kernel allows only when the old range lies
  in one VMA (EFAULT otherwise, check_prep_vma()). mremap move multiple
  invalid VMAs asks whether a page of the target is mapped: a read there
  (SIGSEGV when nothing is).
- The selftest's flags 0 (no MREMAP_MAYMOVE) for the expansions and the
  in-place shrink: the language's mremap always passes MREMAP_MAYMOVE. The
  kernel tries in place first, and the single-VMA resize after each
  expansion fails if it moved.

Sizes are the selftest's: the 2GB PUD moves write and check 4MB as its
default threshold does, and the 40MB preamble is written whole.

Not replayed, and why:
- The three 1GB "perf" moves: the selftest runs them only with a threshold
  of 0 or at least 1GB (not its default), and what they add is the time the
  move takes, which the language does not measure.
- mremap move multiple vmas [dontunnmap] and mremap move multiple vmas
  split [dontunnmap]: the language's mremap has no MREMAP_DONTUNMAP.

mremap move multiple invalid vmas registers ranges with userfaultfd, which
the host agent cannot do: it runs on the model only. In mremap move
multiple vmas split the selftest's pattern check jumps out without setting
its failure flag (a corrupted page would still pass); the replay checks
every page.

    ./gen_mremap_test.py             # writes mremap_test.mms here
    ./gen_mremap_test.py --out DIR   # ... into DIR instead
"""
import replay_file

K = 1 << 10
M = 1 << 20
G = 1 << 30
PAGE = 4 * K
PMD = 2 * M
PUD = G
THRESHOLD = 4 * M  # the selftest's default validation threshold
PREAMBLE = 40 * M  # 10 * _4MB


def size(n):
    """A size or offset as the language writes it."""
    for unit, suffix in ((G, "G"), (M, "M"), (K, "K")):
        if n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def at(region, off):
    return region if off == 0 else f"{region}+{size(off)}"


def chunks(length, first_byte):
    """(offset, length, byte) of the pattern over [0, length)."""
    n = min(64, length // PAGE)
    step = length // n
    return [(i * step, step, first_byte + i) for i in range(n)]


def write_pattern(region, off, length, first_byte=1):
    return [f"P write {at(region, off + o)} {size(n)} {b:#04x}" for o, n, b in chunks(length, first_byte)]


def check_pattern(region, off, length, first_byte=1, written=None):
    """Reads back [0, length) of a pattern written over `written` bytes."""
    return [f"P read {at(region, off + o)} {size(n)} {b:#04x}"
            for o, n, b in chunks(written or length, first_byte) if o < length]


# The table of move tests: (selftest name, source alignment, destination
# alignment, region size, overlapping, expected failure, preamble).
MOVES = [
    ("mremap - Source and Destination Regions Overlapping", PAGE, PAGE, PAGE, True, "EINVAL", 0),
    ("mremap - Destination Address Misaligned (1KB-aligned)", PAGE, PAGE // 4, PAGE, False, "EINVAL", 0),
    ("mremap - Source Address Misaligned (1KB-aligned)", PAGE // 4, PAGE, PAGE, False, "EINVAL", 0),
    ("8KB mremap - Source PTE-aligned, Destination PTE-aligned", PAGE, PAGE, 2 * PAGE, False, None, 0),
    ("2MB mremap - Source 1MB-aligned, Destination PTE-aligned", M, PAGE, 2 * M, False, None, 0),
    ("2MB mremap - Source 1MB-aligned, Destination 1MB-aligned", M, M, 2 * M, False, None, 0),
    ("4MB mremap - Source PMD-aligned, Destination PTE-aligned", PMD, PAGE, 4 * M, False, None, 0),
    ("4MB mremap - Source PMD-aligned, Destination 1MB-aligned", PMD, M, 4 * M, False, None, 0),
    ("4MB mremap - Source PMD-aligned, Destination PMD-aligned", PMD, PMD, 4 * M, False, None, 0),
    ("2GB mremap - Source PUD-aligned, Destination PTE-aligned", PUD, PAGE, 2 * G, False, None, 0),
    ("2GB mremap - Source PUD-aligned, Destination 1MB-aligned", PUD, M, 2 * G, False, None, 0),
    ("2GB mremap - Source PUD-aligned, Destination PMD-aligned", PUD, PMD, 2 * G, False, None, 0),
    ("2GB mremap - Source PUD-aligned, Destination PUD-aligned", PUD, PUD, 2 * G, False, None, 0),
    ("5MB mremap - Source 1MB-aligned, Destination 1MB-aligned", M, M, 5 * M, False, None, 0),
    ("5MB mremap - Source 1MB-aligned, Dest 1MB-aligned with 40MB Preamble", M, M, 5 * M, False, None, PREAMBLE),
]


def move_test(i, case):
    name, src_align, dst_align, length, overlapping, err, preamble = case
    out = [f"test mremap-test-{i + 1:02d}-{slug(name)}", f"# [{i + 1}] {name}", "proc P"]
    if src_align < PAGE:
        # The first address the selftest tries that is 1K-aligned and not
        # 2K-aligned is not page-aligned: its MAP_FIXED_NOREPLACE fails.
        out += ["P mmap W 8K none private align=8K", "P munmap W 8K",
                f"expect-error {err} P mmap S {size(length)} rw shared noreplace=W+{size(src_align)}"]
        return out
    # Offsets from a window aligned to twice the source alignment.
    src = src_align
    dst = (src + length + (-dst_align if overlapping else dst_align)) & ~(dst_align - 1)
    dst += preamble
    if not dst & dst_align:
        dst |= dst_align
    window_align = max(2 * src_align, 2 * M)
    window = dst + length
    window = (window + window_align - 1) // window_align * window_align
    out += [f"P mmap W {size(window)} none private align={size(window_align)}", f"P munmap W {size(window)}",
            f"P mmap S {size(length)} rw shared noreplace={at('W', src)}"]
    if preamble:
        out += [f"P mmap E {size(preamble)} rw shared noreplace={at('W', dst - preamble)}"]
    checked = min(THRESHOLD, length)
    out += write_pattern("S", 0, checked)
    if preamble:
        out += write_pattern("E", 0, preamble, 0x81)
    line = f"P mremap S {size(length)} {size(length)} D to={at('W', dst)}"
    if err:
        return out + [f"expect-error {err} {line}"]
    out.append(line)
    out += check_pattern("D", 0, checked)
    if preamble:
        out += check_pattern("E", 0, preamble, 0x81)
    return out


def slug(name):
    s = "".join(c if c.isalnum() else "-" for c in name.lower())
    while "--" in s:
        s = s.replace("--", "-")
    return s.strip("-")


def expand_merge():
    return ["# the middle page unmapped, the first expanded over it",
            "P mmap A 12K rw private", "P munmap A+4K 4K", "P mremap A 4K 8K B",
            "# one VMA over the 3 pages: a resize of them all is allowed",
            "P mremap A 12K 16K C"]


def expand_merge_offset():
    return ["# the last page unmapped, the middle one expanded over it",
            "P mmap A 12K rw private", "P munmap A+8K 4K", "P mremap A+4K 4K 8K B",
            "# one VMA over the 3 pages: a resize of them all is allowed",
            "P mremap A 12K 16K C"]


def move_within_range():
    # 20MB, its source 2MB at the 2MB boundary at or below +6MB (align=2M
    # puts it at +6MB), its destination 2MB below; the upper 1MB of the
    # source moves onto the upper 1MB of the destination.
    return (["P mmap A 20M rw private align=2M", "P write A 20M 0"]
            + write_pattern("A", 6 * M, 2 * M)
            + ["P mremap A+7M 1M 1M D to=A+5M",
               "# the lower 1MB of the source is untouched"]
            + check_pattern("A", 6 * M, M, written=2 * M))


def move_1mb_from_start():
    # Source and destination at 1MB+256K alignment: with mmap_min_addr
    # 4096 the selftest's addresses are 46MB+256K and 56MB+256K, 6MB each,
    # 256K above a PMD boundary (W stands for 46MB).
    return (["P mmap W 18M none private align=2M", "P munmap W 18M",
             "P mmap S 6M rw shared noreplace=W+256K", "P mmap T 6M rw shared noreplace=W+10496K"]
            + write_pattern("S", 0, 2 * M)
            + ["P munmap T 1M", "P mremap S+1M 1M 1M N to=T+1M",
               "# the source's first 1MB is untouched"]
            + check_pattern("S", 0, M, written=2 * M))


def shrink_multiple_vmas(inplace):
    out = ["P mmap A 40K rw private", "P mmap T 40K rw private", "P munmap T 40K"]
    out += [f"P munmap {at('A', i * PAGE)} 4K" for i in range(1, 10, 2)]
    out.append("P mremap A 40K 4K B" + ("" if inplace else " to=T"))
    return out


# mremap move multiple vmas: the pages of the 11 that stay mapped (1, 3, 7
# and 9 are unmapped) and the byte each holds.
MULTI_PAGES = [0, 2, 4, 5, 6, 8, 10]


def multi_check(region, off=0):
    return [f"P read {at(region, off + p * PAGE)} 4K {0x10 + p:#04x}" for p in MULTI_PAGES]


def move_multiple_vmas():
    out = ["P mmap A 44K rw private", "P mmap T 88K rw private", "P munmap T 88K"]
    out += [f"P munmap {at('A', i * PAGE)} 4K" for i in (1, 3, 7, 9)]
    out += [f"P write {at('A', p * PAGE)} 4K {0x10 + p:#04x}" for p in MULTI_PAGES]
    out += ["# the whole range to the target", "P mremap A 44K 44K B to=T"] + multi_check("T")
    out += ["# next to itself", "P mremap T 44K 44K C to=T+44K"] + multi_check("T", 11 * PAGE)
    out += ["# back, over a PROT_NONE mapping", "P mmap X 44K none private fixed=T",
            "P mremap T+44K 44K 44K D to=T"] + multi_check("T")
    return out


def move_multiple_vmas_split():
    pages = [p for p in range(10) if p != 5]
    out = ["P mmap A 40K rw private", "P mmap T 40K rw private", "P munmap T 40K", "P munmap A+20K 4K"]
    out += [f"P write {at('A', p * PAGE)} 4K {0x10 + p:#04x}" for p in pages]
    out += ["# pages 2..8 (the gap at 5) to the target", "P mremap A+8K 28K 28K B to=T"]
    out += [f"P read {at('T', (p - 2) * PAGE)} 4K {0x10 + p:#04x}" for p in pages if 2 <= p <= 8]
    return out


def move_multi_invalid_vmas():
    out = ["P mmap A 40K rw private", "P mmap T 40K none private", "P munmap T 40K"]
    for i in range(0, 10, 2):
        out += [f"P userfaultfd {at('A', i * PAGE)} 4K missing", f"P munmap {at('A', (i + 1) * PAGE)} 4K"]
    out += ["# every VMA is uffd-armed: nothing moves",
            "expect-error EFAULT P mremap A 40K 40K B to=T",
            "expect-error SIGSEGV P read T 4K",
            "# one uffd-armed VMA alone moves",
            "P mremap A 4K 4K B to=T",
            "P munmap T 4K",
            "P mmap X 4K rw private fixed=A",
            "# the first VMA (not armed) moves, then the move stops",
            "expect-error EFAULT P mremap A 40K 40K B to=T",
            "P read T 4K",
            "P munmap T 4K",
            "P munmap A 32K"]
    out += [f"P mmap X{i} 4K rw private fixed={at('A', i * PAGE)}" for i in range(0, 8, 2)]
    out += ["# all but the last (armed) VMA move", "expect-error EFAULT P mremap A 40K 40K B to=T"]
    out += [f"P read {at('T', i * PAGE)} 4K" for i in range(0, 8, 2)]
    out += ["expect-error SIGSEGV P read T+32K 4K"]
    return out


# The functional tests in the selftest's order: (test name, selftest name, lines).
FUNCTIONAL = [
    ("expand-merge", "mremap expand merge", expand_merge),
    ("expand-merge-offset", "mremap expand merge offset", expand_merge_offset),
    ("move-within-range", "mremap mremap move within range", move_within_range),
    ("move-1mb-from-start", "mremap move 1mb from start at 1MB+256KB aligned src", move_1mb_from_start),
    ("shrink-multiple-vmas-inplace", "mremap shrink multiple vmas [inplace]", lambda: shrink_multiple_vmas(True)),
    ("shrink-multiple-vmas", "mremap shrink multiple vmas", lambda: shrink_multiple_vmas(False)),
    ("move-multiple-vmas", "mremap move multiple vmas", move_multiple_vmas),
    ("move-multiple-vmas-split", "mremap move multiple vmas split", move_multiple_vmas_split),
    ("move-multiple-invalid-vmas", "mremap move multiple invalid vmas", move_multi_invalid_vmas),
]


def gen():
    out = ["# Generated by gen_mremap_test.py from tools/testing/selftests/mm/mremap_test.c.",
           "# Do not edit by hand: change the generator and run it again."]
    for i, case in enumerate(MOVES):
        out += [""] + move_test(i, case)
    for name, selftest_name, body in FUNCTIONAL:
        out += ["", f"test mremap-test-{name}", f"# {selftest_name}", "proc P"] + body()
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    replay_file.main(__doc__, "mremap_test.mms", gen)
