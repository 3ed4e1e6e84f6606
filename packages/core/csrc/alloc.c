/* CPU allocator: 64-byte aligned blocks with a size-class cache.
 *
 * Fresh pages cost a page fault each on first touch; a loop that allocates a 40 MB result every
 * iteration would spend most of its time faulting. Freed blocks are therefore kept per size class
 * and handed out again. Classes: multiples of 64 bytes up to 1 KiB, then four classes per power
 * of two (at most 25% waste). Blocks of 2 MiB and more come from mmap, aligned to 2 MiB and
 * advised for transparent huge pages. The cache is bounded (fm_alloc_set_cache_limit); past the
 * bound, freed blocks go back to the system.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "fiamma.h"

#define NCLASSES 256
#define HUGE_THRESHOLD (2 << 20)
#define HUGE_ALIGN (2 << 20)

typedef struct fm_block {
    struct fm_block *next;
} fm_block;

static fm_block *free_lists[NCLASSES];
static int64_t in_use, cached, peak, hits, misses;
static int64_t cache_limit = (int64_t)2 << 30;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Alignas(64) char zero_block[64];

/* Map a request to (class index, rounded size). Returns -1 for sizes too large to cache. */
static int size_class(int64_t n, int64_t *rounded) {
    if (n <= 1024) {
        int64_t r = (n + 63) & ~(int64_t)63;
        *rounded = r;
        return (int)(r / 64) - 1; /* 0..15 */
    }
    int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
    int64_t base = (int64_t)1 << p;
    int64_t step = base / 4;
    int64_t k = (n - base + step - 1) / step; /* 1..4 */
    *rounded = base + k * step;
    int idx = 16 + (p - 10) * 4 + (int)(k - 1);
    return idx < NCLASSES ? idx : -1;
}

static void *sys_alloc(int64_t size) {
    if (size >= HUGE_THRESHOLD) {
        /* over-map so that the block can be aligned to 2 MiB, then trim */
        size_t len = (size_t)size + HUGE_ALIGN;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        uintptr_t a = ((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
        size_t head = a - (uintptr_t)p;
        size_t tail = len - head - (size_t)size;
        if (head) munmap(p, head);
        if (tail) munmap((char *)a + size, tail);
#ifdef MADV_HUGEPAGE
        madvise((void *)a, (size_t)size, MADV_HUGEPAGE);
#endif
        return (void *)a;
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, (size_t)size) != 0) return NULL;
    return p;
}

static void sys_free(void *p, int64_t size) {
    if (size >= HUGE_THRESHOLD)
        munmap(p, (size_t)size);
    else
        free(p);
}

static void *alloc_impl(int64_t nbytes, int *fresh) {
    *fresh = 0;
    if (nbytes < 0) return NULL;
    if (nbytes == 0) return zero_block;
    int64_t rounded;
    int c = size_class(nbytes, &rounded);
    if (c < 0) rounded = (nbytes + 4095) & ~(int64_t)4095;
    void *p = NULL;
    pthread_mutex_lock(&lock);
    if (c >= 0 && free_lists[c]) {
        fm_block *b = free_lists[c];
        free_lists[c] = b->next;
        cached -= rounded;
        hits++;
        p = b;
    } else {
        misses++;
    }
    if (p) {
        in_use += rounded;
        if (in_use > peak) peak = in_use;
    }
    pthread_mutex_unlock(&lock);
    if (p) return p;
    p = sys_alloc(rounded);
    if (!p) {
        /* out of memory: give the cache back and try once more */
        fm_alloc_empty_cache();
        p = sys_alloc(rounded);
        if (!p) return NULL;
    }
    *fresh = rounded >= HUGE_THRESHOLD; /* fresh mmap pages are already zero */
    pthread_mutex_lock(&lock);
    in_use += rounded;
    if (in_use > peak) peak = in_use;
    pthread_mutex_unlock(&lock);
    return p;
}

intptr_t fm_alloc(int64_t nbytes) {
    int fresh;
    return (intptr_t)alloc_impl(nbytes, &fresh);
}

intptr_t fm_alloc_zeroed(int64_t nbytes) {
    int fresh;
    void *p = alloc_impl(nbytes, &fresh);
    if (p && !fresh && nbytes > 0) memset(p, 0, (size_t)nbytes);
    return (intptr_t)p;
}

void fm_free(intptr_t ptr, int64_t nbytes) {
    void *p = (void *)ptr;
    if (!p || p == (void *)zero_block || nbytes <= 0) return;
    int64_t rounded;
    int c = size_class(nbytes, &rounded);
    if (c < 0) rounded = (nbytes + 4095) & ~(int64_t)4095;
    pthread_mutex_lock(&lock);
    in_use -= rounded;
    if (c >= 0 && cached + rounded <= cache_limit) {
        fm_block *b = (fm_block *)p;
        b->next = free_lists[c];
        free_lists[c] = b;
        cached += rounded;
        p = NULL;
    }
    pthread_mutex_unlock(&lock);
    if (p) sys_free(p, rounded);
}

void fm_alloc_stats(int64_t *out) {
    pthread_mutex_lock(&lock);
    out[0] = in_use;
    out[1] = cached;
    out[2] = peak;
    out[3] = hits;
    out[4] = misses;
    out[5] = cache_limit;
    pthread_mutex_unlock(&lock);
}

void fm_alloc_set_cache_limit(int64_t nbytes) {
    pthread_mutex_lock(&lock);
    cache_limit = nbytes < 0 ? 0 : nbytes;
    pthread_mutex_unlock(&lock);
    if (cached > cache_limit) fm_alloc_empty_cache();
}

void fm_alloc_empty_cache(void) {
    for (int c = 0; c < NCLASSES; c++) {
        pthread_mutex_lock(&lock);
        fm_block *b = free_lists[c];
        free_lists[c] = NULL;
        pthread_mutex_unlock(&lock);
        while (b) {
            fm_block *next = b->next;
            /* recover the class size from its index */
            int64_t size;
            if (c < 16)
                size = (int64_t)(c + 1) * 64;
            else {
                int p = (c - 16) / 4 + 10, k = (c - 16) % 4 + 1;
                size = ((int64_t)1 << p) + k * (((int64_t)1 << p) / 4);
            }
            pthread_mutex_lock(&lock);
            cached -= size;
            pthread_mutex_unlock(&lock);
            sys_free(b, size);
            b = next;
        }
    }
}

void fm_alloc_reset_peak(void) {
    pthread_mutex_lock(&lock);
    peak = in_use;
    pthread_mutex_unlock(&lock);
}
