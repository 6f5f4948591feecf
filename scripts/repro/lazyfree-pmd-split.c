// Reproducer for a host-kernel observation recorded in docs/HOST.md: reclaim
// (MADV_PAGEOUT) of a PMD-mapped THP that MADV_FREE made lazy-free splits
// the PMD mapping first (thp_split_pmd +1) and then unmaps the 512 PTEs,
// whether the folio is clean (and discarded), read, redirtied or held by a
// GUP reference. Upstream v6.18's try_to_unmap_one handles a lazy-free PMD
// mapping whole (unmap_huge_pmd_locked): discarded when clean, kept as a PMD
// otherwise, with no split in any of the four cases.
//
//   gcc -O1 -o /tmp/lfpmd scripts/repro/lazyfree-pmd-split.c
//   for m in clean read write gup; do /tmp/lfpmd $m; done
//
// Each line gives the thp_split_pmd and pglazyfreed deltas (machine-wide
// counters: run it on an idle machine), whether the range is still
// PMD-mapped (AnonHugePages of this process) and the byte read back.
// THP must be "madvise" or "always" (/sys/kernel/mm/transparent_hugepage/enabled).
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static long vmstat(const char* name) {
  FILE* f = fopen("/proc/vmstat", "r");
  char key[128];
  long v = -1, found = -1;
  if (!f) return -1;
  while (fscanf(f, "%127s %ld", key, &v) == 2)
    if (!strcmp(key, name)) found = v;
  fclose(f);
  return found;
}

static long anon_huge_kb(void) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  long kb = -1;
  if (!f) return -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "AnonHugePages: %ld", &kb) == 1) break;
  fclose(f);
  return kb;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "clean";
  // lru_add_drain() drains only this CPU's batches: stay on one CPU.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(0, &cpus);
  sched_setaffinity(0, sizeof(cpus), &cpus);

  const size_t size = 2ul << 20;
  char* raw = mmap(NULL, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  char* mem = (char*)(((uintptr_t)raw + size - 1) & ~(uintptr_t)(size - 1));
  madvise(mem, size, MADV_HUGEPAGE);
  memset(mem, 0x55, size);
  if (anon_huge_kb() < 2048) {
    fprintf(stderr, "no PMD-mapped THP (is THP enabled?)\n");
    return 1;
  }
  int pipefd[2];
  if (pipe(pipefd)) return 1;
  const long split0 = vmstat("thp_split_pmd"), freed0 = vmstat("pglazyfreed");
  madvise(mem, size, MADV_FREE);
  if (!strcmp(mode, "read")) {
    volatile char c = mem[100];
    (void)c;
  } else if (!strcmp(mode, "write")) {
    mem[100] = 0x66;
  } else if (!strcmp(mode, "gup")) {
    struct iovec iov = {mem + 4096, 4096};  // the pipe holds a reference to one page
    if (vmsplice(pipefd[1], &iov, 1, 0) != 4096) perror("vmsplice");
  }
  madvise(mem, size, MADV_PAGEOUT);
  printf("%-5s thp_split_pmd %+ld pglazyfreed %+ld AnonHugePages %ld kB byte %#x\n", mode,
         vmstat("thp_split_pmd") - split0, vmstat("pglazyfreed") - freed0, anon_huge_kb(), mem[200] & 0xff);
  return 0;
}
