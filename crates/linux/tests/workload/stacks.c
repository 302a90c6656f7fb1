/* A test workload for call stacks (`udamon record --call-stacks`, `report code --folded`).
 *
 * usage: stacks SECONDS OUT    for SECONDS, caller_a and caller_b each call the same touch()
 *                              on a buffer of their own (32 MiB anonymous each, summed in
 *                              strides): only the callers tell the buffers' samples apart;
 *                              "area a|b START END" (hex) go to OUT first
 *
 * Built -O2 -g -fno-omit-frame-pointer by the tests. The functions are noipa (no inlining, no
 * cloning) and the callers do work after the call, so that no call becomes a tail jump that
 * would drop the caller's frame. touch() calls counted() so that it is no leaf function: GCC 12
 * gives leaf functions no frame pointer (even with -mno-omit-leaf-frame-pointer), and a sample
 * in one then skips its caller.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MiB (1024UL * 1024UL)
#define SIZE (32 * MiB)

static volatile uint64_t sink, calls;

__attribute__((noipa)) void counted(void) {
    calls++;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sums strided 8-byte words of buf[start, end). */
__attribute__((noipa)) uint64_t touch(const volatile uint64_t *buf, size_t start, size_t end) {
    uint64_t sum = 0;
    for (size_t i = start; i < end; i += 8)
        sum += buf[i];
    counted();
    return sum;
}

__attribute__((noipa)) void caller_a(const uint64_t *a, size_t start, size_t end) {
    sink += touch(a, start, end);
}

__attribute__((noipa)) void caller_b(const uint64_t *b, size_t start, size_t end) {
    sink += touch(b, start, end);
}

static uint64_t *buffer(void) {
    uint64_t *buf = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("stacks: mmap");
        exit(1);
    }
    memset(buf, 1, SIZE);
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: stacks SECONDS OUT\n");
        return 2;
    }
    uint64_t *a = buffer(), *b = buffer();
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    fprintf(out, "area a %lx %lx\n", (unsigned long)a, (unsigned long)a + SIZE);
    fprintf(out, "area b %lx %lx\n", (unsigned long)b, (unsigned long)b + SIZE);
    fclose(out);
    const size_t words = SIZE / 8, slice = 64 * 1024;
    size_t at = 0;
    double end = now_s() + atof(argv[1]);
    while (now_s() < end) {
        for (int k = 0; k < 16; k++) {
            caller_a(a, at, at + slice);
            caller_b(b, at, at + slice);
            at = (at + slice + 1) % (words - slice);
        }
    }
    return 0;
}
