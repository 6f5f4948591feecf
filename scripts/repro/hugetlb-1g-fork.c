// Reproducer for a host-kernel observation recorded in docs/HOST.md: after
// fork() of a process with a private 1G hugetlb mapping, the child sometimes
// has no entry for it (pagemap shows it not present) and its first access
// faults in a fresh zero-filled page instead of sharing the parent's.
//
//   gcc -O1 -o /tmp/h1g scripts/repro/hugetlb-1g-fork.c
//   echo 3 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
//   for i in $(seq 40); do /tmp/h1g; done | sort | uniq -c
//   echo 0 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
//
// Prints "shared" when the child maps the parent's page at fork (what
// copy_hugetlb_page_range is expected to do), "missing" otherwise.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t pagemap_entry(const void* addr) {
  uint64_t e = 0;
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd >= 0) {
    if (pread(fd, &e, sizeof(e), (off_t)((uintptr_t)addr / 4096 * 8)) != sizeof(e)) e = 0;
    close(fd);
  }
  return e;
}

int main(void) {
  const size_t size = 1ul << 30;
  char* mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (30 << MAP_HUGE_SHIFT), -1, 0);
  if (mem == MAP_FAILED) {
    perror("mmap (are 1G huge pages reserved?)");
    return 1;
  }
  memset(mem, 1, size);
  pid_t pid = fork();
  if (pid == 0) {
    int present = (pagemap_entry(mem) >> 63) & 1;  // looked at before touching it
    printf("%s (child reads %d)\n", present ? "shared" : "missing", mem[0]);
    fflush(stdout);
    _exit(0);
  }
  waitpid(pid, NULL, 0);
  return 0;
}
