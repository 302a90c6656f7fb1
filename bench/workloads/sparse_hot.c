/* A small hot area in a huge address space, for udamon's check that a sampled source's small hot
 * area becomes a region of its own within a few windows (crates/udamon/tests/cli_record_hot.rs).
 *
 * usage: sparse_hot SECONDS REPORT_FILE
 *   reserves 64 GiB with MAP_NORESERVE, writes one page in every 16 MiB of it (4,096 pages
 *   spread over the whole reservation: resident, never touched again, so that its residency
 *   alone does not single out the hot area), then for SECONDS makes random 8-byte
 *   read-modify-writes in a 32 MiB hot area 37 GiB + 3 MiB into the reservation, with the
 *   generator and loop counters in registers.
 *   Writes "area reservation START END" and "area hot START END" (hex) to REPORT_FILE before
 *   the loop starts, then "start NS" (CLOCK_MONOTONIC nanoseconds).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define MiB (1024UL * 1024UL)
#define GiB (1024UL * MiB)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: sparse_hot SECONDS REPORT_FILE\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    size_t len = 64 * GiB, hot_len = 32 * MiB, hot_off = 37 * GiB + 3 * MiB;
    char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t off = 0; off < len; off += 16 * MiB)
        mem[off] = 1;
    char *hot = mem + hot_off;
    for (size_t off = 0; off < hot_len; off += 4096)
        hot[off] = 1;
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    fprintf(out, "area reservation %lx %lx\n", (unsigned long)mem, (unsigned long)(mem + len));
    fprintf(out, "area hot %lx %lx\n", (unsigned long)hot, (unsigned long)(hot + hot_len));
    uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
    fprintf(out, "start %llu\n", (unsigned long long)start);
    fclose(out);
    uint64_t mask = hot_len / 8 - 1, s = 0x9E3779B97F4A7C15ULL;
    volatile uint64_t *words = (volatile uint64_t *)hot;
    while (now_ns() < end) {
        for (int i = 0; i < 65536; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            words[s & mask] += s;
        }
    }
    return 0;
}
