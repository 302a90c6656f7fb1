/* Test workloads with a known access pattern, for udamon's vaddr accuracy tests.
 *
 * usage: patterns static|stairs|zigzag [-p SECONDS_PER_PHASE] [-t SECONDS] [-o FILE]
 *   static  a 1 GiB mapping with a fixed layout: a 64 MiB hot area at its start, a 256 MiB warm area after it
 *           touched at a tenth of the hot area's rate, and 704 MiB never touched after start;
 *           runs -t seconds (default 6)
 *   stairs  ten 10 MiB areas of one mapping, touched one after another for -p seconds each
 *           (default 1.5)
 *   zigzag  two 100 MiB areas of one mapping, alternating every -p seconds (default 1.5) for -t
 *           seconds (default 6)
 *
 *   -o      write the report below to FILE instead of stdout
 *
 * Everything is written once at start (so that it is resident), then the pattern runs: random
 * 8-byte read-modify-writes, with the random generator and the loop counters in registers. On
 * stdout (or FILE), before the pattern starts: "area NAME START END" (hex addresses) for every area, then
 * "start NS" (CLOCK_MONOTONIC nanoseconds); "phase I NS" when phase I begins; "end NS" at the end.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024UL * 1024UL)

static FILE *out;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static inline uint64_t next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void area(const char *name, char *start, size_t len) {
    fprintf(out, "area %s %lx %lx\n", name, (unsigned long)start, (unsigned long)(start + len));
}

/* `rounds` blocks of accesses: each block makes `hot` accesses in a, then `warm` in b. Sizes
 * are powers of two. */
static void touch(char *a, size_t a_len, unsigned hot, char *b, size_t b_len, unsigned warm,
                  unsigned rounds) {
    /* A local generator state stays in a register: the loop's only memory accesses are the
     * areas'. */
    uint64_t am = a_len / 8 - 1, bm = b_len / 8 - 1, s = rng;
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < hot; i++) {
            uint64_t x = next(&s);
            ((volatile uint64_t *)a)[x & am] += x;
        }
        for (unsigned i = 0; i < warm; i++) {
            uint64_t x = next(&s);
            ((volatile uint64_t *)b)[x & bm] += x;
        }
    }
    rng = s;
}

static char *map(size_t len) {
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 1, len);
    return p;
}

static void phase(int i) {
    fprintf(out, "phase %d %lu\n", i, (unsigned long)now_ns());
    fflush(out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: patterns static|stairs|zigzag [-p SECONDS] [-t SECONDS] [-o FILE]\n");
        return 2;
    }
    const char *mode = argv[1];
    double per_phase = 1.5, total = 6;
    int opt;
    out = stdout;
    optind = 2;
    while ((opt = getopt(argc, argv, "p:t:o:")) != -1) {
        switch (opt) {
        case 'p': per_phase = atof(optarg); break;
        case 't': total = atof(optarg); break;
        case 'o':
            out = fopen(optarg, "w");
            if (!out) {
                perror(optarg);
                return 2;
            }
            break;
        default: return 2;
        }
    }
    uint64_t start, phase_ns = (uint64_t)(per_phase * 1e9);
    if (!strcmp(mode, "static")) {
        char *big = map(1024 * MiB);
        char *hot = big, *warm = big + 64 * MiB, *cold = big + 320 * MiB;
        area("hot", hot, 64 * MiB);
        area("warm", warm, 256 * MiB);
        area("cold", cold, 704 * MiB);
        start = now_ns();
        fprintf(out, "start %lu\n", (unsigned long)start);
        fflush(out);
        uint64_t end = start + (uint64_t)(total * 1e9);
        while (now_ns() < end)
            touch(hot, 64 * MiB, 10, warm, 256 * MiB, 1, 4096);
    } else if (!strcmp(mode, "stairs")) {
        char *m = map(100 * MiB);
        char name[16];
        for (int i = 0; i < 10; i++) {
            snprintf(name, sizeof name, "step%d", i);
            area(name, m + i * 10 * MiB, 10 * MiB);
        }
        start = now_ns();
        fprintf(out, "start %lu\n", (unsigned long)start);
        for (int i = 0; i < 10; i++) {
            phase(i);
            char *a = m + i * 10 * MiB;
            /* 10 MiB is not a power of two: touch its 8 MiB and 2 MiB parts in proportion. */
            uint64_t end = now_ns() + phase_ns;
            while (now_ns() < end)
                touch(a, 8 * MiB, 4, a + 8 * MiB, 2 * MiB, 1, 4096);
        }
    } else if (!strcmp(mode, "zigzag")) {
        char *m = map(200 * MiB);
        area("first", m, 100 * MiB);
        area("second", m + 100 * MiB, 100 * MiB);
        start = now_ns();
        fprintf(out, "start %lu\n", (unsigned long)start);
        uint64_t end = start + (uint64_t)(total * 1e9);
        for (int i = 0; now_ns() < end; i++) {
            phase(i);
            char *a = m + (i % 2) * 100 * MiB;
            uint64_t phase_end = now_ns() + phase_ns;
            /* 100 MiB = 64 + 32 + 4 MiB, touched in proportion. */
            while (now_ns() < phase_end && now_ns() < end) {
                touch(a, 64 * MiB, 16, a + 64 * MiB, 32 * MiB, 8, 1024);
                touch(a + 96 * MiB, 4 * MiB, 1, a, 64 * MiB, 0, 1024);
            }
        }
    } else {
        fprintf(stderr, "unknown pattern %s\n", mode);
        return 2;
    }
    fprintf(out, "end %lu\n", (unsigned long)now_ns());
    fclose(out);
    return 0;
}
