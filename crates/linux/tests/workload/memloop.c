/* Test workload for udamon-linux's perf tests: worker threads writing over private buffers.
 *
 * usage: memloop [-t SECONDS] [-n WORKERS] [-m MIB] [-o FILE] [-s] [-e PATH ARGS...]
 *   -t  how long the workers run (default 1)
 *   -n  worker threads besides the main thread (default 0)
 *   -m  buffer size per worker in MiB (default 16)
 *   -o  write "tid N" for every worker, then "ready", to FILE instead of stdout ("ready" comes
 *       once every initial worker has its buffer)
 *   -s  the main thread does not work: it reads stdin and starts one more worker per line
 *       (until EOF or the deadline)
 *   -d  make the process non-dumpable (prctl PR_SET_DUMPABLE 0)
 *   -e  afterwards, exec PATH with ARGS (argv[0] = PATH)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double deadline;
static size_t buf_bytes = 16u << 20;
static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void say(const char *s) {
    pthread_mutex_lock(&out_lock);
    fputs(s, out);
    fflush(out);
    pthread_mutex_unlock(&out_lock);
}

static int started; /* workers that reported their tid, under out_lock */

static void report_tid(void) {
    pthread_mutex_lock(&out_lock);
    fprintf(out, "tid %ld\n", (long)syscall(SYS_gettid));
    fflush(out);
    started++;
    pthread_mutex_unlock(&out_lock);
}

static int nr_started(void) {
    pthread_mutex_lock(&out_lock);
    int n = started;
    pthread_mutex_unlock(&out_lock);
    return n;
}

/* A zeroed buffer, so that it is mapped before the thread reports itself. */
static volatile uint64_t *alloc_buf(void) {
    volatile uint64_t *buf = malloc(buf_bytes);
    memset((void *)buf, 0, buf_bytes);
    return buf;
}

static void loop(volatile uint64_t *buf) {
    size_t n = buf_bytes / sizeof(uint64_t);
    while (now() < deadline)
        for (size_t i = 0; i < n; i += 8) /* one write per cache line */
            buf[i] += i;
}

static void *work(void *arg) {
    (void)arg;
    volatile uint64_t *buf = alloc_buf();
    report_tid();
    loop(buf);
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = 1;
    int workers = 0, from_stdin = 0, opt;
    out = stdout;
    while ((opt = getopt(argc, argv, "+t:n:m:o:sde")) != -1) {
        switch (opt) {
        case 't': seconds = atof(optarg); break;
        case 'n': workers = atoi(optarg); break;
        case 'm': buf_bytes = (size_t)atoi(optarg) << 20; break;
        case 'o': out = fopen(optarg, "w"); if (!out) { perror(optarg); return 2; } break;
        case 's': from_stdin = 1; break;
        case 'd': prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); break;
        case 'e': goto args_done;
        default: return 2;
        }
    }
args_done:;
    int exec_at = opt == 'e' ? optind : -1;
    if (exec_at >= argc) { fprintf(stderr, "-e needs a program\n"); return 2; }
    deadline = now() + seconds;
    pthread_t t[256];
    int nt = 0;
    for (; nt < workers && nt < 256; nt++)
        pthread_create(&t[nt], NULL, work, NULL);
    while (nr_started() < nt)
        usleep(1000);
    volatile uint64_t *buf = NULL;
    if (!from_stdin) {
        buf = alloc_buf();
        report_tid();
    }
    say("ready\n");
    if (from_stdin) {
        char line[64];
        while (now() < deadline && nt < 256 && fgets(line, sizeof line, stdin))
            pthread_create(&t[nt++], NULL, work, NULL);
    } else {
        loop(buf);
    }
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    if (exec_at > 0) {
        if (out != stdout) fclose(out);
        execv(argv[exec_at], &argv[exec_at]);
        perror(argv[exec_at]);
        return 127;
    }
    return 0;
}
