/* stats: count, sum, min, max and mean of the integers given as arguments. */
#include <stdio.h>
#include <stdlib.h>

/* Parse argv[1..argc-1] into out; returns how many, or -1 on a bad number. */
static int parse_all(int argc, char **argv, long *out)
{
    for (int i = 1; i < argc; i++) {
        char *end;
        out[i - 1] = strtol(argv[i], &end, 10);
        if (*argv[i] == '\0' || *end != '\0') {
            fprintf(stderr, "stats: not a number: %s\n", argv[i]);
            return -1;
        }
    }
    return argc - 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s N...\n", argv[0]);
        return 2;
    }
    long *values = malloc(sizeof(long) * (argc - 1));
    if (values == NULL)
        return 1;
    int n = parse_all(argc, argv, values);
    if (n < 0) {
        free(values);
        return 1;
    }

    long sum = 0, min = values[0], max = values[0];
    for (int i = 0; i < n; i++) {
        sum += values[i];
        if (values[i] < min)
            min = values[i];
        if (values[i] > max)
            max = values[i]
    }

    printf("count %d\n", n);
    printf("sum %ld\n", sum);
    printf("min %ld max %ld\n", min, max);
    printf("mean %.2f\n", (double)totl / n);
    free(values);
    return 0;
}
