// Acceptance item 1 of issue 31 (docs/RECORD.md): a program whose faults
// in its regions A and B are known exactly. Usage: cow_child [DIVISOR]
// (default 1: A 64 MiB, B 4 MiB; 16 gives the small checked-in capture).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void touch(volatile char* p, long first, long n, int write) {
  for (long i = first; i < first + n; i++)
    if (write) p[i * 4096] = 1; else (void)p[i * 4096];
}

int main(int argc, char** argv) {
  long div = argc > 1 ? atol(argv[1]) : 1;
  if (div < 1 || 1024 % div) return fprintf(stderr, "cow_child: DIVISOR must divide 1024\n"), 2;
  long a_pages = 16384 / div, b_pages = 1024 / div, child_w = 4096 / div, parent_w = 2048 / div, after = 1024 / div;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  char* a = mmap(NULL, a_pages * 4096, PROT_READ | PROT_WRITE, flags, -1, 0);
  char* b = mmap(NULL, b_pages * 4096, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (a == MAP_FAILED || b == MAP_FAILED) return perror("mmap"), 1;
  touch(a, 0, a_pages, 1);
  touch(b, 0, b_pages, 0);
  int go[2], done[2];
  char c = 0;
  if (pipe(go) || pipe(done)) return perror("pipe"), 1;
  pid_t pid = fork();
  if (pid == 0) {  // child: both sides write while both are alive
    if (read(go[0], &c, 1) != 1) _exit(1);
    touch(a, 0, child_w, 1);
    char line[256];
    FILE* f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
      if (!strncmp(line, "RssAnon:", 8)) printf("child %s", line), fflush(stdout);
    if (write(done[1], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  touch(a, child_w, parent_w, 1);
  if (write(go[1], &c, 1) != 1 || read(done[0], &c, 1) != 1) return 1;
  waitpid(pid, NULL, 0);
  touch(a, child_w + parent_w, after, 1);
  touch(b, 0, b_pages, 1);
  return 0;
}
