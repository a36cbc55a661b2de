/*
 * replay_main.c — runs a fuzz target (fuzz_frame.c, fuzz_peer.c) without
 * libFuzzer (gcc builds): every
 * file of the corpus, then N pseudo-random mutations of them (bit flips,
 * interesting bytes, inserts, deletes, truncations, splices, rewritten
 * length headers), reproducible from the seed.
 *
 * usage: fuzz_<target>_replay [-n MUTATIONS] [-s SEED] PATH...  (files or dirs)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"

#define REPLAY_MAX_INPUT (1u << 20)
#define MAX_SEEDS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint8_t *data;
    size_t len;
} input_t;

static input_t seeds[MAX_SEEDS];
static size_t n_seeds;
static const char *prog = "fuzz_replay"; /* argv[0]'s last component, for messages */

static void load_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f || n_seeds == MAX_SEEDS) {
        if (f)
            fclose(f);
        return;
    }
    uint8_t *buf = malloc(REPLAY_MAX_INPUT);
    size_t n = buf ? fread(buf, 1, REPLAY_MAX_INPUT, f) : 0;
    fclose(f);
    if (!buf)
        return;
    seeds[n_seeds].data = buf;
    seeds[n_seeds].len = n;
    n_seeds++;
}

static void load(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: cannot read %s\n", prog, path);
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        load_file(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            load_file(p);
    }
    if (d)
        closedir(d);
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap, uint64_t *rng)
{
    static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x0a, 0x12, 0x52, 0x6a};
    int ops = 1 + (int)(test_rand64(rng) % 8);
    for (int i = 0; i < ops; i++) {
        uint64_t r = test_rand64(rng);
        size_t at = len ? (size_t)(test_rand64(rng) % len) : 0;
        switch (r % 8) {
        case 0: /* flip a bit */
            if (len)
                buf[at] ^= (uint8_t)(1u << (r >> 8) % 8);
            break;
        case 1: /* interesting byte */
            if (len)
                buf[at] = interesting[(r >> 8) % sizeof(interesting)];
            break;
        case 2: /* insert a random byte */
            if (len < cap) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = (uint8_t)(r >> 16);
                len++;
            }
            break;
        case 3: /* delete a range */
            if (len) {
                size_t n = 1 + (size_t)((r >> 8) % 8);
                if (n > len - at)
                    n = len - at;
                memmove(buf + at, buf + at + n, len - at - n);
                len -= n;
            }
            break;
        case 4: /* truncate */
            len = at;
            break;
        case 5: /* splice another seed's tail */
        {
            const input_t *o = &seeds[(r >> 8) % n_seeds];
            size_t from = o->len ? (size_t)(test_rand64(rng) % o->len) : 0;
            size_t n = o->len - from;
            if (n > cap - at)
                n = cap - at;
            memcpy(buf + at, o->data + from, n);
            len = at + n;
            break;
        }
        case 6: /* rewrite the frame header to a plausible length */
            if (len >= 4) {
                uint32_t v = (uint32_t)((r >> 8) % (len + 8));
                if ((r >> 40) % 4 == 0)
                    v = (uint32_t)(r >> 32);
                buf[0] = (uint8_t)(v >> 24);
                buf[1] = (uint8_t)(v >> 16);
                buf[2] = (uint8_t)(v >> 8);
                buf[3] = (uint8_t)v;
            }
            break;
        default: /* duplicate a range in place */
            if (len && len < cap) {
                size_t n = 1 + (size_t)((r >> 8) % 16);
                if (n > len - at)
                    n = len - at;
                if (n > cap - len)
                    n = cap - len;
                memmove(buf + at + n, buf + at, len - at);
                len += n;
            }
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    long mutations = 20000;
    uint64_t rng = 0x5eed;
    if (argc > 0 && argv[0][0]) {
        const char *slash = strrchr(argv[0], '/');
        prog = slash ? slash + 1 : argv[0];
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i += 2) {
        if (i + 1 >= argc)
            break;
        if (strcmp(argv[i], "-n") == 0)
            mutations = atol(argv[i + 1]);
        else if (strcmp(argv[i], "-s") == 0)
            rng = strtoull(argv[i + 1], NULL, 0);
    }
    for (; i < argc; i++)
        load(argv[i]);
    if (n_seeds == 0) {
        fprintf(stderr, "usage: %s [-n N] [-s SEED] PATH... (no inputs found)\n", prog);
        return 2;
    }
    for (size_t k = 0; k < n_seeds; k++)
        LLVMFuzzerTestOneInput(seeds[k].data, seeds[k].len);
    size_t cap = 64 * 1024;
    uint8_t *buf = malloc(cap);
    ASSERT(buf != NULL);
    for (long m = 0; m < mutations; m++) {
        const input_t *s = &seeds[test_rand64(&rng) % n_seeds];
        size_t len = s->len < cap ? s->len : cap;
        memcpy(buf, s->data, len);
        len = mutate(buf, len, cap, &rng);
        LLVMFuzzerTestOneInput(buf, len);
    }
    free(buf);
    for (size_t k = 0; k < n_seeds; k++)
        free(seeds[k].data);
    printf("%s: %zu inputs, %ld mutations, no failure\n", prog, n_seeds, mutations);
    return 0;
}
