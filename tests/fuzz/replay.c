/*
 * replay.c — run a fuzz target over saved inputs without libFuzzer (Knot's tests-fuzz/main.c).
 *
 * Usage: replay PATH...   where each PATH is a file or a directory whose regular files are
 * inputs. Every input goes through LLVMFuzzerTestOneInput once; the target aborts on a broken
 * invariant and the sanitizers catch memory errors, so reaching the end means the corpus passes.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs bigger than a DNS message over TCP are not meaningful for our targets. */
#define REPLAY_MAX_INPUT (1u << 20)

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    uint8_t *buf = malloc(REPLAY_MAX_INPUT);
    if (buf == NULL) {
        fclose(f);
        return -1;
    }
    size_t n = fread(buf, 1, REPLAY_MAX_INPUT, f);
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "%s: read error\n", path);
        free(buf);
        return -1;
    }
    /* an exact-size copy so the sanitizers see reads past the end of the input */
    uint8_t *input = malloc(n ? n : 1);
    if (input == NULL) {
        free(buf);
        return -1;
    }
    memcpy(input, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(input, n);
    free(input);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay every regular file of dir in name order; returns the count or -1. */
static long replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        perror(dir);
        return -1;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    long done = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof(*names));
            if (grown == NULL)
                goto fail;
            names = grown;
        }
        names[count] = strdup(e->d_name);
        if (names[count] == NULL)
            goto fail;
        count++;
    }
    qsort(names, count, sizeof(*names), cmp_names);
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (replay_file(path) != 0)
            goto fail;
        done++;
    }
    goto out;
fail:
    done = -1;
out:
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return done;
}

int main(int argc, char **argv)
{
    long total = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            long n = replay_dir(argv[i]);
            if (n < 0)
                return 1;
            total += n;
        } else {
            if (replay_file(argv[i]) != 0)
                return 1;
            total++;
        }
    }
    printf("replayed %ld inputs\n", total);
    return total > 0 ? 0 : 1;
}
