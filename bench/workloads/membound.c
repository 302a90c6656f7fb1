/* A long-running memory-bound target for live-bench: random 8-byte read-modify-writes over a
 * private anonymous mapping, counting its progress in a shared file so that the bench can
 * measure throughput per window without the target doing any I/O.
 *
 * usage: membound MIB COUNTER_FILE
 *   maps MIB MiB, writes every page once (so that all of it is resident), then loops forever:
 *   blocks of 4096 random accesses, after each of which the 8-byte counter at the start of
 *   COUNTER_FILE (created, shared mapping) is incremented. The counter stays 0 until every page
 *   has been written.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: membound MIB COUNTER_FILE\n");
        return 2;
    }
    size_t len = (size_t)atol(argv[1]) << 20;
    if (len & (len - 1)) {
        fprintf(stderr, "MIB must be a power of two\n");
        return 2;
    }
    int fd = open(argv[2], O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(argv[2]);
        return 2;
    }
    volatile uint64_t *counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (counter == MAP_FAILED || mem == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(mem, 1, len);
    uint64_t mask = len / 8 - 1, s = 0x9E3779B97F4A7C15ULL;
    for (;;) {
        for (int i = 0; i < 4096; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((volatile uint64_t *)mem)[s & mask] += s;
        }
        *counter += 1;
    }
}
