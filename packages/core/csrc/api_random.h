/* Random numbers (random.c) and range creation fills (creation.c).
 *
 * Random kernels are counter based (Philox4x32-10): a call gets the generator's key (the 64-bit
 * seed) and the counter offset (in 128-bit Philox blocks) it starts at, so element i of a result
 * depends only on (seed, offset, i): never on threads or on how the work is split. Outputs are
 * contiguous; element i uses block offset + i/4 (32-bit draws) or offset + i/2 (64-bit draws).
 * fm_rand_blocks says how many blocks a call uses, so the caller can advance its counter.
 */

/* one Philox4x32-10 block: out[0..3] from ctr[0..3] and key[0..1] (for known-answer tests) */
void fm_philox4x32_10(const uint32_t *ctr, const uint32_t *key, uint32_t *out);

/* distributions for fm_rand_fill (a, b: the parameters) */
#define FM_RAND_UNIFORM 0     /* [a, b) */
#define FM_RAND_NORMAL 1      /* mean a, std b */
#define FM_RAND_BERNOULLI 2   /* p = a; 0/1 in any dtype */
#define FM_RAND_EXPONENTIAL 3 /* lambda = a */
#define FM_RAND_GEOMETRIC 4   /* p = a; values 1, 2, ... */
#define FM_RAND_LOGNORMAL 5   /* exp(normal(a, b)) */
#define FM_RAND_CAUCHY 6      /* median a, sigma b */
/* not fm_rand_fill distributions: one 64-bit draw per value (fm_rand_int, fm_randperm,
   fm_rand_bernoulli_p, fm_multinomial), for fm_rand_blocks */
#define FM_RAND_BITS64 16

/* number of Philox blocks a call over n values of dist/dtype consumes */
int64_t fm_rand_blocks(int dist, int dtype, int64_t n);

/* fill n contiguous elements of dtype at out */
int fm_rand_fill(int dist, int dtype, int64_t n, intptr_t out, uint64_t seed, uint64_t offset,
                 double a, double b);

/* integers low + [0, range) (range == 0 means 2^64), stored in dtype (any) */
int fm_rand_int(int dtype, int64_t n, intptr_t out, uint64_t seed, uint64_t offset,
                int64_t low, uint64_t range);

/* out[i] = 1 with probability p[i] (p: n contiguous doubles). Checks every p in [0, 1] before
   writing; on a bad one returns FM_ERR_VALUE with its index in *bad. */
int fm_rand_bernoulli_p(int dtype, int64_t n, intptr_t out, intptr_t p, uint64_t seed,
                        uint64_t offset, int64_t *bad);

/* a random permutation of 0..n-1 into n int64 at out (Fisher-Yates) */
int fm_randperm(int64_t n, intptr_t out, uint64_t seed, uint64_t offset);

/* Sample nsamp category indices per row of probs (rows x ncat contiguous doubles, unnormalised)
   into out (rows x nsamp int64). Without replacement no index repeats within a row. On invalid
   input returns FM_ERR_VALUE with info[0] = the row and info[1] = the reason: 1 an element is
   negative, inf or nan; 2 the row sums to 0; 3 fewer nonzero categories than nsamp (without
   replacement). Draws: rows*nsamp (with replacement) or rows*ncat (without) 64-bit values. */
int fm_multinomial(int64_t rows, int64_t ncat, intptr_t probs, int64_t nsamp, int replacement,
                   intptr_t out, uint64_t seed, uint64_t offset, int64_t *info);

/* ---- range fills (creation.c), n contiguous elements of dtype at out ---------------------- */
/* floats: start + i*step (double); integers: istart + i*istep (int64, wrapping) */
int fm_arange(int dtype, int64_t n, intptr_t out, double start, double step, int64_t istart,
              int64_t istep);
/* PyTorch's symmetric formula: start + i*step for i < n/2, end - (n-1-i)*step after */
int fm_linspace(int dtype, int64_t n, intptr_t out, double start, double end);
/* base ** linspace(start, end, n) */
int fm_logspace(int dtype, int64_t n, intptr_t out, double start, double end, double base);
