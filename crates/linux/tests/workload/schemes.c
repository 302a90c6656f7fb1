/* Test workload for DAMOS actions on live processes: cold and hot memory, file-backed and
 * anonymous, in separate mappings, with its own residency counts (mincore) on request.
 *
 * usage: schemes COLD_FILE HOT_FILE SECONDS [ANON_MIB]
 *   COLD_FILE  mapped and read once at start, then left alone, between inaccessible 32 MiB
 *              guards (the libraries above it and HOT_FILE below it get samples)
 *   HOT_FILE   mapped and read page by page for the whole run
 *   ANON_MIB   size of each anonymous area (default 16): a hot one written page by page for the
 *              whole run and a cold one written once, each 2 MiB aligned, each followed by an
 *              inaccessible 32 MiB guard, so that they are separate mappings far enough apart
 *              from each other and from the files for the monitor to tell them apart early
 * Prints "NAME ADDR LEN" for cold_file, hot_file, hot_anon and cold_anon, then "ready". For
 * every line read on stdin it prints "resident cold_file N hot_file N hot_anon N cold_anon N"
 * (pages in memory, per mincore), after reading COLD_FILE again if the line is "reread".
 * Exits after SECONDS or at EOF on stdin.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096ul
#define HUGE (2ul << 20)
#define GUARD (32ul << 20)

struct area { const char *name; char *addr; size_t len; };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct area map_file(const char *name, const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); exit(1); }
    struct stat st;
    fstat(fd, &st);
    char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    close(fd);
    return (struct area){ name, p, (size_t)st.st_size };
}

static void guard(void) {
    if (mmap(NULL, GUARD, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
}

static size_t resident(const struct area *a) {
    size_t n = a->len / PAGE, count = 0;
    unsigned char *vec = malloc(n);
    if (mincore(a->addr, a->len, vec) != 0) { perror("mincore"); exit(1); }
    for (size_t i = 0; i < n; i++) count += vec[i] & 1;
    free(vec);
    return count;
}

static volatile unsigned long sink;

static void read_pages(const struct area *a) {
    unsigned long s = 0;
    for (size_t i = 0; i < a->len; i += PAGE) s += (unsigned char)a->addr[i];
    sink += s;
}

static void write_pages(const struct area *a, unsigned char v) {
    for (size_t i = 0; i < a->len; i += PAGE) a->addr[i] = v;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: schemes COLD_FILE HOT_FILE SECONDS [ANON_MIB]\n"); return 2; }
    double deadline = now() + atof(argv[3]);
    size_t anon = (argc > 4 ? strtoul(argv[4], NULL, 10) : 16) << 20;
    struct area a[4];
    /* Mappings are placed top-down: guards keep the cold file from the libraries above it and
     * from the hot file below it. */
    guard();
    a[0] = map_file("cold_file", argv[1]);
    guard();
    a[1] = map_file("hot_file", argv[2]);
    size_t total = 2 * anon + 2 * GUARD + HUGE;
    char *raw = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return 1; }
    char *base = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
    a[2] = (struct area){ "hot_anon", base, anon };
    a[3] = (struct area){ "cold_anon", base + anon + GUARD, anon };
    mprotect(base + anon, GUARD, PROT_NONE);
    mprotect(base + 2 * anon + GUARD, GUARD, PROT_NONE);
    read_pages(&a[0]);
    write_pages(&a[2], 1);
    write_pages(&a[3], 2);
    for (int i = 0; i < 4; i++) printf("%s %p %zu\n", a[i].name, (void *)a[i].addr, a[i].len);
    printf("ready\n");
    fflush(stdout);
    unsigned char v = 3;
    while (now() < deadline) {
        read_pages(&a[1]);
        write_pages(&a[2], v++);
        struct pollfd pfd = { 0, POLLIN, 0 };
        if (poll(&pfd, 1, 0) > 0) {
            char line[64];
            if (!fgets(line, sizeof line, stdin)) break;
            if (!strncmp(line, "reread", 6)) read_pages(&a[0]);
            printf("resident cold_file %zu hot_file %zu hot_anon %zu cold_anon %zu\n",
                   resident(&a[0]), resident(&a[1]), resident(&a[2]), resident(&a[3]));
            fflush(stdout);
        }
    }
    return 0;
}
