/* A test workload whose memory is partly shared with another process, for the host's
 * physical view: the same file mapped by several processes is the same physical memory.
 *
 * usage: shared FILE PRIVATE_MIB SECONDS
 *   maps all of FILE shared and PRIVATE_MIB MiB of private anonymous memory, writes every page
 *   of both once (so that all of it is resident), prints "ready" on stdout, then for SECONDS
 *   makes random 8-byte read-modify-writes spread evenly over every byte of both.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: shared FILE PRIVATE_MIB SECONDS\n");
        return 2;
    }
    int fd = open(argv[1], O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(argv[1]);
        return 2;
    }
    size_t file_len = (size_t)st.st_size & ~(size_t)7;
    size_t private_len = (size_t)atol(argv[2]) << 20;
    uint64_t seconds = (uint64_t)atol(argv[3]);
    char *file = mmap(NULL, file_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *private = private_len
        ? mmap(NULL, private_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        : NULL;
    if (file == MAP_FAILED || private == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t i = 0; i < file_len; i += 4096)
        file[i] += 1;
    if (private_len)
        memset(private, 1, private_len);
    printf("ready\n");
    fflush(stdout);
    uint64_t words = (file_len + private_len) / 8, file_words = file_len / 8;
    uint64_t s = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
    uint64_t end = now_ns() + seconds * 1000000000ULL;
    while (now_ns() < end) {
        for (int i = 0; i < 4096; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            uint64_t w = s % words;
            volatile uint64_t *p = w < file_words ? (uint64_t *)file + w
                                                  : (uint64_t *)private + (w - file_words);
            *p += s;
        }
    }
    return 0;
}
