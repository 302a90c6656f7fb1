/* A multi-threaded target for the judge bench: 4 threads, each doing random 8-byte
 * read-modify-writes over its own 32 MiB area, and a shared 256 MiB area written once at start
 * and never again (resident but cold).
 *
 * usage: threads SECONDS
 *   prints "ready" once every area is written, then runs for SECONDS and exits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MiB (1024UL * 1024UL)
#define NR_THREADS 4
#define AREA (32 * MiB)

static double end;
static pthread_barrier_t written;

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

static void *worker(void *arg) {
    /* Each thread maps its own area, so that the areas are separate mappings. */
    volatile uint64_t *a = (volatile uint64_t *)map(AREA);
    uint64_t s = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1), mask = AREA / 8 - 1;
    pthread_barrier_wait(&written);
    while (now_s() < end)
        for (int i = 0; i < 1 << 16; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            a[s & mask] += s;
        }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: threads SECONDS\n");
        return 2;
    }
    end = now_s() + atof(argv[1]);
    pthread_barrier_init(&written, NULL, NR_THREADS + 1);
    map(256 * MiB);
    pthread_t t[NR_THREADS];
    for (uintptr_t i = 0; i < NR_THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_barrier_wait(&written);
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < NR_THREADS; i++)
        pthread_join(t[i], NULL);
    return 0;
}
