/* A test workload for naming the code behind sampled accesses (`udamon report code`).
 *
 * usage: code run SECONDS OUT          two functions, each on its own buffer, for SECONDS:
 *                                      read_anon_buffer reads a 32 MiB anonymous buffer,
 *                                      write_file_buffer writes a 32 MiB shared mapping of a
 *                                      file; "area anon|file START END" (hex) go to OUT first
 *        code exec SECONDS OUT OTHER   without address-space randomization, runs as `run` for
 *                                      SECONDS, then execs OTHER (a copy of this program, e.g.
 *                                      stripped) with `run SECONDS OUT`: the same addresses then
 *                                      hold the other binary's code
 *        code copy SECONDS OUT         copies 64 KiB chunks from random offsets of a 32 MiB
 *                                      anonymous buffer into one 64 KiB buffer with
 *                                      `rep movsb` (what glibc's memcpy does for such sizes on
 *                                      most CPUs); "area src|dst START END" go to OUT first
 *        code jit SECONDS                 runs generated machine code (jit_sum, which sums
 *                                      strided words) from anonymous executable memory over a
 *                                      32 MiB buffer, naming it in /tmp/perf-PID.map as JITs do;
 *                                      the map is removed at the end
 *
 * SECONDS are the workload's own CPU time (see cpu_s), not the clock's.
 *
 * Built -O2 -g by the tests. Each function alternates in slices of about a millisecond, so that
 * both get samples whatever the sampling rate.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024UL * 1024UL)
#define SIZE (32 * MiB)

/* The workload's own CPU time: it runs for that much, however loaded the machine. A task's
 * clock samples come with the task's CPU time, so a busy machine gives the tests as many
 * samples, later, rather than fewer. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Writes "area NAME START END" (hex) for two buffers to out_path, for the tests to read. */
static void write_areas(const char *out_path, const char *a, const void *a_start, size_t a_len,
                        const char *b, const void *b_start, size_t b_len) {
    FILE *out = fopen(out_path, "w");
    if (!out) {
        perror(out_path);
        exit(1);
    }
    fprintf(out, "area %s %lx %lx\n", a, (unsigned long)a_start, (unsigned long)a_start + a_len);
    fprintf(out, "area %s %lx %lx\n", b, (unsigned long)b_start, (unsigned long)b_start + b_len);
    fclose(out);
}

/* Sums strided 8-byte words: loads only. */
__attribute__((noinline)) uint64_t read_anon_buffer(const volatile uint64_t *buf, size_t words,
                                                    size_t start) {
    uint64_t sum = 0;
    for (size_t i = start; i < words; i += 8)
        sum += buf[i];
    return sum;
}

/* Stores strided 8-byte words: stores only. */
__attribute__((noinline)) void write_file_buffer(volatile uint64_t *map, size_t words, size_t start,
                                                 uint64_t value) {
    for (size_t i = start; i < words; i += 8)
        map[i] = value + i;
}

static void run(double seconds, const char *out_path) {
    uint64_t *anon = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char path[] = "/tmp/udamon-code-XXXXXX";
    int fd = mkstemp(path);
    if (anon == MAP_FAILED || fd < 0 || ftruncate(fd, SIZE) != 0) {
        perror("code: setup");
        exit(1);
    }
    unlink(path);
    uint64_t *file = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (file == MAP_FAILED) {
        perror("code: mmap file");
        exit(1);
    }
    memset(anon, 1, SIZE);
    memset(file, 1, SIZE);
    write_areas(out_path, "anon", anon, SIZE, "file", file, SIZE);
    const size_t words = SIZE / 8, slice = 64 * 1024;
    uint64_t sum = 0;
    size_t at = 0;
    double end = cpu_s() + seconds;
    while (cpu_s() < end) {
        for (int k = 0; k < 16; k++) {
            sum += read_anon_buffer(anon, at + slice, at);
            write_file_buffer(file, at + slice, at, sum);
            at = (at + slice + 1) % (words - slice);
        }
    }
    printf("%lu\n", (unsigned long)(sum & 1));
}

/* Copies n bytes from src to dst with one rep movsb, which a sample interrupts midway. */
__attribute__((noinline)) void copy_chunk(void *dst, const void *src, size_t n) {
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static void copy(double seconds, const char *out_path) {
    const size_t chunk = 64 * 1024;
    unsigned char *src = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *dst = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || dst == MAP_FAILED) {
        perror("code: copy mmap");
        exit(1);
    }
    memset(src, 1, SIZE);
    memset(dst, 1, chunk);
    write_areas(out_path, "src", src, SIZE, "dst", dst, chunk);
    uint64_t x = 88172645463325252ULL, sum = 0;
    double end = cpu_s() + seconds;
    while (cpu_s() < end) {
        for (int k = 0; k < 256; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            copy_chunk(dst, src + (x % (SIZE / chunk)) * chunk, chunk);
            sum += dst[x % chunk];
        }
    }
    printf("%lu\n", (unsigned long)(sum & 1));
}

/* sum = 0; do { sum += *buf; buf += 8 words; } while (--words); return sum; */
static const unsigned char jit_sum_code[] = {
    0x31, 0xc0,             /* xor %eax,%eax */
    0x48, 0x03, 0x07,       /* add (%rdi),%rax */
    0x48, 0x83, 0xc7, 0x40, /* add $0x40,%rdi */
    0x48, 0xff, 0xce,       /* dec %rsi */
    0x75, 0xf4,             /* jne to the add */
    0xc3,                   /* ret */
};

static void jit(double seconds) {
    uint64_t *buf = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED || code == MAP_FAILED) {
        perror("code: jit mmap");
        exit(1);
    }
    memset(buf, 1, SIZE);
    memcpy(code, jit_sum_code, sizeof jit_sum_code);
    char map[64];
    snprintf(map, sizeof map, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(map, "w");
    if (!f) {
        perror(map);
        exit(1);
    }
    fprintf(f, "%lx %zx jit_sum\n", (unsigned long)code, sizeof jit_sum_code);
    fclose(f);
    uint64_t (*sum_fn)(const uint64_t *, size_t) = (uint64_t(*)(const uint64_t *, size_t))code;
    uint64_t sum = 0;
    double end = cpu_s() + seconds;
    while (cpu_s() < end)
        sum += sum_fn(buf, SIZE / 64);
    unlink(map);
    printf("%lu\n", (unsigned long)(sum & 1));
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "jit") == 0) {
        jit(atof(argv[2]));
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "copy") == 0) {
        copy(atof(argv[2]), argv[3]);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "run") == 0) {
        run(atof(argv[2]), argv[3]);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "exec") == 0) {
        /* The first exec only turns randomization off, so that both programs load at the same
         * address. */
        if (!(personality(0xffffffff) & ADDR_NO_RANDOMIZE)) {
            personality(ADDR_NO_RANDOMIZE);
            execv("/proc/self/exe", argv);
            perror("code: re-exec");
            return 1;
        }
        run(atof(argv[2]), argv[3]);
        char *args[] = {argv[4], "run", argv[2], argv[3], NULL};
        execv(argv[4], args);
        perror(argv[4]);
        return 1;
    }
    fprintf(stderr, "usage: code run SECONDS OUT | code exec SECONDS OUT OTHER | code copy SECONDS OUT | "
                    "code jit SECONDS\n");
    return 2;
}
