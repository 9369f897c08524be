/* The CPU guard: runs before main and before any C++ static constructor (priority 101, the first
 * one not reserved for the implementation), compiled for plain x86-64 (build.rs), so that a binary built for a
 * newer baseline refuses to start on a CPU without it instead of dying with SIGILL. The static
 * constructors of llama.cpp/ggml, built for the same baseline, would otherwise fault before
 * main. build.rs generates the table of required features (abhed_cpu_features.h) from the
 * target features rustc was given. */
#include <cpuid.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

struct feature {
    const char *name;
    unsigned leaf, subleaf;
    int reg; /* 1 ebx, 2 ecx, 3 edx */
    unsigned bit;
};

#include "abhed_cpu_features.h"

static int has(const struct feature *f) {
    unsigned r[4] = {0, 0, 0, 0};
    if (!__get_cpuid_count(f->leaf, f->subleaf, &r[0], &r[1], &r[2], &r[3]))
        return 0;
    return (r[f->reg] >> f->bit) & 1;
}

/* AVX needs the OS to save the YMM registers too: OSXSAVE, and XCR0's SSE and AVX bits. */
static int os_saves_ymm(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1))
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}

static void say(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Whether this CPU (and OS) can run code that uses feature `f`. */
static int present(const struct feature *f) {
    int needs_ymm = !strcmp(f->name, "avx") || !strcmp(f->name, "avx2") || !strcmp(f->name, "fma") ||
                    !strcmp(f->name, "f16c");
    return has(f) && (!needs_ymm || os_saves_ymm());
}

__attribute__((constructor(101))) static void abhed_cpu_guard(void) {
    int missing = 0;
    for (const struct feature *f = ABHED_REQUIRED; f->name; f++) {
        if (present(f))
            continue;
        say(missing++ ? ", " : "abhed: this CPU lacks ");
        say(f->name);
    }
    if (!missing)
        return;
    say(", which this build of abhed uses (it is built for " ABHED_BASELINE " CPUs: ");
    for (const struct feature *f = ABHED_REQUIRED; f->name; f++) {
        say(f == ABHED_REQUIRED ? "" : ", ");
        say(f->name);
    }
    say("). It would stop with an illegal instruction, so it does not start. Build abhed for this "
        "CPU from the bundle's sources, offline: cd src && CPU=native bash bundle/static.sh "
        "(docs/BUNDLE.md)\n");
    _exit(2);
}

/* For `abhed doctor` (src/cpu.rs), which reports what this guard checks: the baseline's name.
 * Rust references it, and build.rs names it to the linker, so this object is kept. */
const char *abhed_cpu_guard_baseline(void) {
    return ABHED_BASELINE;
}

/* The i-th required feature and whether this CPU has it (in *ok); NULL past the last. */
const char *abhed_cpu_guard_feature(size_t i, int *ok) {
    for (const struct feature *f = ABHED_REQUIRED; f->name; f++, i--) {
        if (i == 0) {
            *ok = present(f);
            return f->name;
        }
    }
    return NULL;
}
