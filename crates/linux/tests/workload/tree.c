/* Test workload for process trees: a parent that forks two children, each writing over its own
 * anonymous area, one of them after re-executing this program.
 *
 * usage: tree FILE SECONDS
 *   The parent forks child A, which maps 32 MiB and writes over it for SECONDS, then exits
 *   with status 3; and child B, which execs this program as `tree --exec FILE SECONDS`, maps
 *   24 MiB and writes over it for SECONDS, then exits with status 4. The parent waits for
 *   both and exits with status 0. Each child appends "area PID START END" (hexadecimal
 *   addresses, END exclusive) to FILE once its area is mapped and written; the parent appends
 *   "done" after reaping both.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One write(2) per line, appended, so that the processes' lines never interleave. */
static void say(const char *file, const char *line) {
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line))
        exit(2);
    close(fd);
}

static void work(const char *file, size_t mib, double seconds, int status) {
    size_t bytes = mib << 20;
    volatile uint64_t *buf =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        exit(2);
    memset((void *)buf, 1, bytes);
    char line[128];
    snprintf(line, sizeof line, "area %d %lx %lx\n", (int)getpid(), (unsigned long)buf,
             (unsigned long)buf + bytes);
    say(file, line);
    double deadline = now() + seconds;
    size_t n = bytes / sizeof(uint64_t);
    while (now() < deadline)
        for (size_t i = 0; i < n; i += 8) /* one write per cache line */
            buf[i] += i;
    exit(status);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--exec") == 0) {
        work(argv[2], 24, atof(argv[3]), 4);
    }
    if (argc != 3) {
        fprintf(stderr, "usage: tree FILE SECONDS\n");
        return 2;
    }
    const char *file = argv[1];
    double seconds = atof(argv[2]);
    pid_t a = fork();
    if (a == 0)
        work(file, 32, seconds, 3);
    pid_t b = fork();
    if (b == 0) {
        char *args[] = {argv[0], "--exec", argv[1], argv[2], NULL};
        execv("/proc/self/exe", args);
        _exit(2);
    }
    if (a < 0 || b < 0)
        return 2;
    waitpid(a, NULL, 0);
    waitpid(b, NULL, 0);
    say(file, "done\n");
    return 0;
}
