/* A pointer-chasing target for the judge bench: a randomly permuted circular list of 64-byte
 * nodes over 64 MiB, followed one node at a time, so that every access waits for the one before
 * it and lands on an unpredictable cache line. A second, 256 MiB area is written once at start
 * and never touched again: resident but cold.
 *
 * usage: pointer_chase SECONDS
 *   prints "ready" once both areas are written, then chases for SECONDS and exits.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MiB (1024UL * 1024UL)

struct node {
    struct node *next;
    char pad[56];
};

static char *map(size_t len) {
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 1, len);
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: pointer_chase SECONDS\n");
        return 2;
    }
    double end = now_s() + atof(argv[1]);
    size_t n = 64 * MiB / sizeof(struct node);
    struct node *nodes = (struct node *)map(64 * MiB);
    map(256 * MiB);
    /* The order is a random permutation (Fisher-Yates), so that hardware prefetchers cannot
     * guess the next node. */
    uint32_t *order = malloc(n * sizeof *order);
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t j = s % (i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        nodes[order[i]].next = &nodes[order[(i + 1) % n]];
    free(order);
    printf("ready\n");
    fflush(stdout);
    struct node *p = &nodes[0];
    while (now_s() < end)
        for (int i = 0; i < 1 << 20; i++)
            p = p->next;
    /* Using the result keeps the chase from being optimised away. */
    printf("end %p\n", (void *)p);
    return 0;
}
