"""Random numbers: Philox known answers, the documented element -> draw mapping (checked against
a NumPy Philox), reproducibility and generator state, statistics with fixed seeds, errors."""

import math
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma
from fiamma._lib import ffi, lib

FLOATS = [fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64]
INTS = [fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64]


def npy(t):
    """A NumPy copy of a tensor (bfloat16 through float32)."""
    if t.dtype is fiamma.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


# ---- a reference Philox4x32-10 in NumPy (uint64 arithmetic, one row per block) ---------------

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = np.uint64(0xFFFFFFFF)


def philox_ref(ctr, key):
    """ctr: (n, 4) uint64 array of 32-bit words, key: (k0, k1) -> (n, 4) output words."""
    x = [ctr[:, j].astype(np.uint64) for j in range(4)]
    k0, k1 = key
    for _ in range(10):
        p0 = np.uint64(M0) * x[0]
        p1 = np.uint64(M1) * x[2]
        x = [(p1 >> np.uint64(32)) ^ x[1] ^ np.uint64(k0), p1 & MASK,
             (p0 >> np.uint64(32)) ^ x[3] ^ np.uint64(k1), p0 & MASK]
        k0 = (k0 + W0) & 0xFFFFFFFF
        k1 = (k1 + W1) & 0xFFFFFFFF
    return np.stack(x, axis=1)


def ref_words(seed, offset, nblocks):
    """The words of blocks offset .. offset+nblocks-1 under key=seed, flattened (4 per block)."""
    b = np.arange(nblocks, dtype=np.uint64) + np.uint64(offset)
    ctr = np.zeros((nblocks, 4), np.uint64)
    ctr[:, 0] = b & MASK
    ctr[:, 1] = b >> np.uint64(32)
    return philox_ref(ctr, (seed & 0xFFFFFFFF, seed >> 32)).reshape(-1)


def ref_u64(seed, offset, n):
    w = ref_words(seed, offset, (n + 1) // 2)
    return (w[0::2] << np.uint64(32)) | w[1::2]


# ---- Philox itself ----------------------------------------------------------------------------

KAT = [  # Random123's kat_vectors for philox4x32-10: counter, key, expected
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox_known_answers(ctr, key, expected):
    out = ffi.new("uint32_t[4]")
    lib.fm_philox4x32_10(ffi.new("uint32_t[4]", ctr), ffi.new("uint32_t[2]", key), out)
    assert list(out) == expected
    assert philox_ref(np.array([ctr], np.uint64), key)[0].tolist() == expected


@pytest.mark.parametrize("offset", [0, 7, 2**32 - 5, 2**40 + 3, 2**64 - 3])
@pytest.mark.parametrize("n", [1, 5, 255, 256, 257, 1000])
def test_rand_float32_is_documented_mapping(offset, n):
    # element i = top 24 bits of word i%4 of block offset + i//4 (covers the SIMD lanes, chunk
    # tails, the low-counter-word wrap and the 64-bit counter wrap)
    seed = 0x123456789ABCDEF
    g = fiamma.Generator().manual_seed(seed).set_offset(offset)
    x = fiamma.rand(n, generator=g)
    w = ref_words(seed, offset, (n + 3) // 4)[:n]
    np.testing.assert_array_equal(npy(x), (w >> np.uint64(8)).astype(np.float64) * 2.0**-24)
    assert g.get_offset() == (offset + (n + 3) // 4) % 2**64


@pytest.mark.parametrize("offset", [0, 2**32 - 3])
def test_rand_float64_and_randint_mapping(offset):
    seed = 99
    n = 301
    g = fiamma.Generator().manual_seed(seed).set_offset(offset)
    x = fiamma.rand(n, generator=g, dtype=fiamma.float64)
    u = ref_u64(seed, offset, n)[:n]
    np.testing.assert_array_equal(npy(x), (u >> np.uint64(11)).astype(np.float64) * 2.0**-53)
    g.manual_seed(seed).set_offset(offset)
    r = fiamma.randint(-7, 1000, (n,), generator=g)
    expect = [-7 + ((int(v) * 1007) >> 64) for v in u]
    assert npy(r).tolist() == expect


def test_randn_float32_matches_box_muller_reference():
    seed, n = 5, 1000
    x = npy(fiamma.randn(n, generator=fiamma.Generator().manual_seed(seed)))
    w = ref_words(seed, 0, n // 4)
    u1 = ((w[0::2] >> np.uint64(8)) + np.uint64(1)).astype(np.float64) * 2.0**-24
    u2 = (w[1::2] >> np.uint64(8)).astype(np.float64) * 2.0**-24
    r = np.sqrt(-2 * np.log(u1))
    ref = np.empty(n)
    ref[0::2] = r * np.cos(2 * np.pi * u2)
    ref[1::2] = r * np.sin(2 * np.pi * u2)
    np.testing.assert_allclose(x, ref, rtol=2e-6, atol=2e-6)


def test_randn_float64_matches_box_muller_reference():
    seed, n = 6, 1000
    x = npy(fiamma.randn(n, generator=fiamma.Generator().manual_seed(seed), dtype=fiamma.float64))
    u = ref_u64(seed, 0, n)
    u1 = ((u[0::2] >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0**-53
    u2 = (u[1::2] >> np.uint64(11)).astype(np.float64) * 2.0**-53
    r = np.sqrt(-2 * np.log(u1))
    ref = np.empty(n)
    ref[0::2] = r * np.cos(2 * np.pi * u2)
    ref[1::2] = r * np.sin(2 * np.pi * u2)
    np.testing.assert_allclose(x, ref, rtol=1e-13, atol=1e-13)


def test_python_block_count_matches_c():
    from fiamma import _random as R

    for dist in (lib.FM_RAND_UNIFORM, lib.FM_RAND_NORMAL, lib.FM_RAND_BERNOULLI,
                 lib.FM_RAND_EXPONENTIAL, lib.FM_RAND_GEOMETRIC, lib.FM_RAND_LOGNORMAL,
                 lib.FM_RAND_CAUCHY, lib.FM_RAND_BITS64):
        for dt in fiamma._dtype.ALL:
            for n in (0, 1, 2, 3, 4, 5, 1001):
                assert R._blocks(dist, dt.code, n) == lib.fm_rand_blocks(dist, dt.code, n)


# ---- reproducibility and generator state ------------------------------------------------------

def test_same_seed_same_numbers_different_seed_different():
    for fn in (lambda: fiamma.rand(100), lambda: fiamma.randn(3, 7),
               lambda: fiamma.randint(0, 50, (64,)), lambda: fiamma.randperm(40),
               lambda: fiamma.rand(33, dtype=fiamma.float64),
               lambda: fiamma.multinomial(fiamma.ones(30), 10)):
        fiamma.manual_seed(1234)
        a = npy(fn())
        fiamma.manual_seed(1234)
        b = npy(fn())
        fiamma.manual_seed(1235)
        c = npy(fn())
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)


def test_reseed_reproduces_whole_sequence_and_calls_differ():
    fiamma.manual_seed(7)
    seq = [npy(fiamma.rand(5)), npy(fiamma.randn(6)), npy(fiamma.randint(9, (4,)))]
    assert not np.array_equal(npy(fiamma.rand(5)), seq[0])  # the counter moved on
    fiamma.manual_seed(7)
    again = [npy(fiamma.rand(5)), npy(fiamma.randn(6)), npy(fiamma.randint(9, (4,)))]
    for a, b in zip(seq, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dt,per_block", [(fiamma.float32, 4), (fiamma.float16, 4),
                                          (fiamma.float64, 2)])
def test_counter_advances_by_values_drawn(dt, per_block):
    # rand(5) then rand(3) == rand(big)[k:k+3] where k is the first element of the next block
    g = fiamma.Generator().manual_seed(11)
    fiamma.rand(5, generator=g, dtype=dt)
    b = npy(fiamma.rand(3, generator=g, dtype=dt))
    k = -(-5 // per_block) * per_block
    whole = npy(fiamma.rand(k + 3, generator=g.manual_seed(11), dtype=dt))
    np.testing.assert_array_equal(b, whole[k:])


def test_result_does_not_depend_on_layout_or_split():
    g = fiamma.Generator()
    y = fiamma.zeros(4, 3).t()  # non-contiguous target
    y.uniform_(generator=g.manual_seed(3))
    np.testing.assert_array_equal(npy(y), npy(fiamma.rand(3, 4, generator=g.manual_seed(3))))
    z = fiamma.zeros(6, 10).as_strided((6, 5), (10, 2))  # every other column
    z.normal_(generator=g.manual_seed(4))
    np.testing.assert_array_equal(npy(z), npy(fiamma.randn(6, 5, generator=g.manual_seed(4))))
    # one big draw == the same draw in pieces of whole blocks
    big = npy(fiamma.rand(4096, generator=g.manual_seed(5)))
    g.manual_seed(5)
    parts = np.concatenate([npy(fiamma.rand(n, generator=g)) for n in (256, 1024, 4, 2812)])
    np.testing.assert_array_equal(big, parts)


def test_generator_independent_of_global():
    fiamma.manual_seed(0)
    a = npy(fiamma.rand(10))
    fiamma.manual_seed(0)
    g = fiamma.Generator().manual_seed(99)
    fiamma.rand(10, generator=g)  # must not move the default generator
    np.testing.assert_array_equal(npy(fiamma.rand(10)), a)
    g1 = fiamma.Generator().manual_seed(5)
    g2 = fiamma.Generator().manual_seed(5)
    np.testing.assert_array_equal(npy(fiamma.randn(9, generator=g1)),
                                  npy(fiamma.randn(9, generator=g2)))


def test_state_round_trip():
    g = fiamma.Generator().manual_seed(2024)
    fiamma.rand(17, generator=g)
    s = g.get_state()
    assert s.dtype is fiamma.uint8 and s.shape == (24,)
    a = npy(fiamma.randn(50, generator=g))
    g.manual_seed(1)
    g.set_state(s)
    np.testing.assert_array_equal(npy(fiamma.randn(50, generator=g)), a)
    assert g.initial_seed() == 2024
    # the global functions
    fiamma.manual_seed(3)
    fiamma.rand(3)
    st_ = fiamma.get_rng_state()
    a = npy(fiamma.rand(8))
    fiamma.set_rng_state(st_)
    np.testing.assert_array_equal(npy(fiamma.rand(8)), a)
    before = npy(fiamma.get_rng_state())
    with fiamma.random.fork_rng():
        fiamma.rand(100)
    np.testing.assert_array_equal(npy(fiamma.get_rng_state()), before)


def test_state_errors_and_seed_rules():
    g = fiamma.Generator()
    with pytest.raises(TypeError, match="set_state"):
        g.set_state(fiamma.zeros(24))
    with pytest.raises(RuntimeError, match="set_state"):
        g.set_state(fiamma.zeros(3, dtype=fiamma.uint8))
    with pytest.raises(RuntimeError, match="set_state"):
        g.set_state(fiamma.zeros(24, dtype=fiamma.uint8))  # bad header
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1
    assert g.manual_seed(2**64 - 1).initial_seed() == 2**64 - 1
    with pytest.raises(ValueError, match="manual_seed"):
        g.manual_seed(2**64)
    with pytest.raises(TypeError, match="manual_seed"):
        g.manual_seed("abc")
    assert fiamma.manual_seed(5) is fiamma.default_generator
    assert fiamma.initial_seed() == 5
    s = fiamma.seed()
    assert fiamma.initial_seed() == s and 0 <= s < 2**64
    assert fiamma.Generator().initial_seed() == 67280421310721
    assert fiamma.Generator("cpu").device == fiamma.device("cpu")
    with pytest.raises(TypeError, match="rand"):
        fiamma.rand(3, generator=123)


def test_generator_pickles():
    g = fiamma.Generator().manual_seed(8)
    fiamma.rand(5, generator=g)
    h = pickle.loads(pickle.dumps(g))
    np.testing.assert_array_equal(npy(fiamma.rand(9, generator=g)),
                                  npy(fiamma.rand(9, generator=h)))


# ---- statistics (fixed seeds, tolerant bounds) -----------------------------------------------

N = 10**6


def test_rand_moments_and_range():
    g = fiamma.Generator().manual_seed(0)
    for dt in (fiamma.float32, fiamma.float64):
        x = npy(fiamma.rand(N, generator=g, dtype=dt)).astype(np.float64)
        assert x.min() >= 0 and x.max() < 1
        assert abs(x.mean() - 0.5) < 2e-3
        assert abs(x.var() - 1 / 12) < 1e-3
    for dt in (fiamma.float16, fiamma.bfloat16):
        x = npy(fiamma.rand(10**5, generator=g, dtype=dt)).astype(np.float64)
        assert x.min() >= 0 and x.max() < 1  # drawn with the dtype's own mantissa bits
        assert abs(x.mean() - 0.5) < 0.01


def test_randn_moments():
    g = fiamma.Generator().manual_seed(1)
    for dt in (fiamma.float32, fiamma.float64):
        x = npy(fiamma.randn(N, generator=g, dtype=dt)).astype(np.float64)
        assert abs(x.mean()) < 5e-3
        assert abs(x.var() - 1) < 6e-3
        assert abs((x**3).mean()) < 0.02          # skewness
        assert abs((x**4).mean() - 3) < 0.05      # kurtosis
        assert abs((np.abs(x) < 1).mean() - 0.682689) < 3e-3
    for dt in (fiamma.float16, fiamma.bfloat16):
        x = npy(fiamma.randn(10**5, generator=g, dtype=dt)).astype(np.float64)
        assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02


def test_uniform_normal_inplace_stats_and_bounds():
    g = fiamma.Generator().manual_seed(2)
    for dt in FLOATS:
        x = fiamma.empty(20000, dtype=dt).uniform_(-3, 5, generator=g)
        v = npy(x).astype(np.float64)
        assert v.min() >= -3 and v.max() < 5
        assert abs(v.mean() - 1) < 0.1
        y = fiamma.empty(20000, dtype=dt).normal_(10, 2, generator=g)
        v = npy(y).astype(np.float64)
        assert abs(v.mean() - 10) < 0.1 and abs(v.std() - 2) < 0.1
    # [from, to) even where rounding would reach `to`
    x = npy(fiamma.empty(10**5, dtype=fiamma.float16).uniform_(1000, 1001, generator=g))
    assert x.max() < 1001 and x.min() >= 1000
    assert np.all(npy(fiamma.empty(5).uniform_(2, 2)) == 2)
    assert np.all(npy(fiamma.empty(5).normal_(4, 0)) == 4)


def test_other_distributions():
    g = fiamma.Generator().manual_seed(3)
    n = 200000
    e = npy(fiamma.empty(n, dtype=fiamma.float64).exponential_(2.0, generator=g))
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.01 and abs(e.std() - 0.5) < 0.01
    geo = npy(fiamma.empty(n, dtype=fiamma.int64).geometric_(0.25, generator=g))
    assert geo.min() >= 1 and abs(geo.mean() - 4) < 0.05
    assert abs((geo == 1).mean() - 0.25) < 0.01
    geo32 = npy(fiamma.empty(n).geometric_(0.5, generator=g))
    assert geo32.min() >= 1 and abs(geo32.mean() - 2) < 0.03
    ln = npy(fiamma.empty(n, dtype=fiamma.float64).log_normal_(0.5, 0.25, generator=g))
    assert ln.min() > 0
    assert abs(np.log(ln).mean() - 0.5) < 0.01 and abs(np.log(ln).std() - 0.25) < 0.01
    c = npy(fiamma.empty(n, dtype=fiamma.float64).cauchy_(1.0, 2.0, generator=g))
    q25, q50, q75 = np.quantile(c, [0.25, 0.5, 0.75])
    assert abs(q50 - 1) < 0.05 and abs(q25 + 1) < 0.08 and abs(q75 - 3) < 0.08
    for dt in FLOATS:
        for fn in (lambda t: t.exponential_(generator=g), lambda t: t.log_normal_(generator=g),
                   lambda t: t.cauchy_(generator=g), lambda t: t.geometric_(0.3, generator=g)):
            v = npy(fn(fiamma.empty(1000, dtype=dt))).astype(np.float64)
            assert not np.isnan(v).any()


def test_bernoulli():
    g = fiamma.Generator().manual_seed(4)
    for dt in [fiamma.bool] + INTS + FLOATS:
        x = npy(fiamma.empty(50000, dtype=dt).bernoulli_(0.3, generator=g)).astype(np.float64)
        assert set(np.unique(x)) <= {0.0, 1.0}
        assert abs(x.mean() - 0.3) < 0.01
    p = fiamma.tensor([0.0, 1.0, 0.5, 0.9]).expand(20000, 4)
    x = npy(fiamma.bernoulli(p, generator=g))
    assert x.dtype == np.float32
    np.testing.assert_allclose(x.mean(0), [0, 1, 0.5, 0.9], atol=0.015)
    assert x[:, 0].max() == 0 and x[:, 1].min() == 1
    # bernoulli_(p tensor) broadcasts p; scalar p and tensor p draw the same numbers
    y = fiamma.empty(3, 5).bernoulli_(fiamma.full((5,), 0.4), generator=g.manual_seed(9))
    z = fiamma.empty(3, 5).bernoulli_(0.4, generator=g.manual_seed(9))
    np.testing.assert_array_equal(npy(y), npy(z))
    assert fiamma.bernoulli(fiamma.zeros(4, dtype=fiamma.int64), 1.0).tolist() == [1, 1, 1, 1]
    assert fiamma.zeros(3).bernoulli().tolist() == [0.0, 0.0, 0.0]


def test_randint_range_and_uniformity():
    g = fiamma.Generator().manual_seed(5)
    x = npy(fiamma.randint(-3, 7, (100000,), generator=g))
    assert x.min() == -3 and x.max() == 6
    counts = np.bincount(x + 3, minlength=10)
    chi2 = ((counts - 10000) ** 2 / 10000).sum()
    assert chi2 < 40  # 9 dof: p < 1e-5
    for dt in INTS + [fiamma.bool] + FLOATS:
        lo, hi = (0, 2) if dt is fiamma.bool else (-5 if dt is not fiamma.uint8 else 0, 100)
        v = npy(fiamma.randint(lo, hi, (5000,), generator=g, dtype=dt)).astype(np.float64)
        assert v.min() == lo and v.max() == hi - 1
        assert np.all(v == np.floor(v))
    # huge ranges: full int64
    v = npy(fiamma.randint(-2**63, 2**63 - 1, (1000,), generator=g))
    assert (v < 0).mean() > 0.4 and (v > 0).mean() > 0.4
    assert fiamma.randint(5, (2, 3)).shape == (2, 3)
    assert fiamma.randint(low=2, high=4, size=(3,)).dtype is fiamma.int64
    r = npy(fiamma.randint_like(fiamma.zeros(2, 3), 10))
    assert r.shape == (2, 3) and r.dtype == np.float32 and r.max() < 10
    r = npy(fiamma.randint_like(fiamma.zeros(50, dtype=fiamma.int16), 3, 6))
    assert r.dtype == np.int16 and r.min() >= 3 and r.max() <= 5


def test_random_inplace_ranges():
    g = fiamma.Generator().manual_seed(6)
    u8 = npy(fiamma.empty(20000, dtype=fiamma.uint8).random_(generator=g))
    assert u8.min() == 0 and u8.max() == 255
    i8 = npy(fiamma.empty(20000, dtype=fiamma.int8).random_(generator=g))
    assert i8.min() == 0 and i8.max() == 127
    b = npy(fiamma.empty(1000, dtype=fiamma.bool).random_(generator=g))
    assert b.any() and not b.all()
    f = npy(fiamma.empty(20000).random_(generator=g))
    assert f.min() >= 0 and f.max() <= 2**24 and np.all(f == np.floor(f))
    v = npy(fiamma.empty(5000, dtype=fiamma.int64).random_(10, generator=g))
    assert v.min() == 0 and v.max() == 9
    v = npy(fiamma.empty(5000, dtype=fiamma.int32).random_(-4, 4, generator=g))
    assert v.min() == -4 and v.max() == 3
    v = npy(fiamma.empty(5000, dtype=fiamma.uint8).random_(250, None, generator=g))
    assert v.min() == 250 and v.max() == 255
    v = npy(fiamma.empty(5000, dtype=fiamma.int16).random_(**{"from": 30000}, generator=g))
    assert v.min() >= 30000 and v.max() == 32767


def test_randperm():
    g = fiamma.Generator().manual_seed(7)
    for n in (0, 1, 2, 10, 1000, 100003):
        p = fiamma.randperm(n, generator=g)
        assert p.dtype is fiamma.int64 and p.shape == (n,)
        np.testing.assert_array_equal(np.sort(npy(p)), np.arange(n))
    for dt in (fiamma.int16, fiamma.float32, fiamma.uint8, fiamma.bfloat16):
        p = npy(fiamma.randperm(200, generator=g, dtype=dt))
        np.testing.assert_array_equal(np.sort(p.astype(np.int64)), np.arange(200))
    # all 6 permutations of 3 about equally often
    g.manual_seed(8)
    counts = {}
    for _ in range(3000):
        k = tuple(fiamma.randperm(3, generator=g).tolist())
        counts[k] = counts.get(k, 0) + 1
    assert len(counts) == 6
    chi2 = sum((c - 500) ** 2 / 500 for c in counts.values())
    assert chi2 < 25  # 5 dof
    # the element that lands in front is uniform for a larger n
    first = [fiamma.randperm(10, generator=g).tolist()[0] for _ in range(2000)]
    counts = np.bincount(first, minlength=10)
    assert ((counts - 200) ** 2 / 200).sum() < 35


def test_multinomial_with_replacement_frequencies():
    g = fiamma.Generator().manual_seed(9)
    p = np.array([0.1, 0.0, 0.4, 0.2, 0.3])
    s = npy(fiamma.multinomial(fiamma.tensor(p * 7), 100000, True, generator=g))
    assert s.dtype == np.int64 and s.shape == (100000,)
    counts = np.bincount(s, minlength=5)
    assert counts[1] == 0
    nz = p > 0
    exp = p[nz] * 100000
    assert ((counts[nz] - exp) ** 2 / exp).sum() < 25  # 3 dof
    # 2-d: each row its own distribution
    rows = fiamma.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 5.0], [1.0, 1.0, 0.0]])
    s = npy(fiamma.multinomial(rows, 1000, replacement=True, generator=g))
    assert s.shape == (3, 1000)
    assert np.all(s[0] == 0) and np.all(s[1] == 2) and set(np.unique(s[2])) == {0, 1}


def test_multinomial_without_replacement():
    g = fiamma.Generator().manual_seed(10)
    w = fiamma.tensor([[1.0, 2.0, 0.0, 3.0, 4.0, 0.5]] * 500, dtype=fiamma.float64)
    s = npy(fiamma.multinomial(w, 5, generator=g))
    assert s.shape == (500, 5)
    for row in s:
        assert len(set(row.tolist())) == 5 and 2 not in row
    # the first draw follows the probabilities
    first = npy(fiamma.multinomial(fiamma.tensor([1.0, 2.0, 3.0, 4.0]).expand(20000, 4), 2,
                                   generator=g))[:, 0]
    counts = np.bincount(first, minlength=4)
    exp = np.array([1, 2, 3, 4]) / 10 * 20000
    assert ((counts - exp) ** 2 / exp).sum() < 25
    # taking every category is a permutation; zero rows give an empty result
    s = npy(fiamma.multinomial(fiamma.rand(4, 50, generator=g) + 0.1, 50, generator=g))
    for row in s:
        np.testing.assert_array_equal(np.sort(row), np.arange(50))
    assert fiamma.multinomial(fiamma.ones(0, 3), 2).shape == (0, 2)
    for dt in (fiamma.float16, fiamma.bfloat16, fiamma.float32):
        s = fiamma.multinomial(fiamma.ones(7, dtype=dt), 3, generator=g).tolist()
        assert len(set(s)) == 3


def test_multinomial_errors():
    m = fiamma.multinomial
    with pytest.raises(RuntimeError, match="multinomial.*element < 0"):
        m(fiamma.tensor([1.0, -2.0, 0.5]), 1, True)
    with pytest.raises(RuntimeError, match="multinomial.*inf"):
        m(fiamma.tensor([1.0, math.inf]), 1)
    with pytest.raises(RuntimeError, match="multinomial.*nan"):
        m(fiamma.tensor([1.0, math.nan]), 1)
    with pytest.raises(RuntimeError, match=r"multinomial.*sum of probabilities <= 0.*row 1"):
        m(fiamma.tensor([[1.0, 2.0], [0.0, 0.0]]), 1, True)
    with pytest.raises(RuntimeError, match="multinomial.*not enough"):
        m(fiamma.tensor([1.0, 0.0, 0.0]), 2)
    with pytest.raises(RuntimeError, match="multinomial.*without replacement"):
        m(fiamma.tensor([1.0, 1.0]), 3)
    with pytest.raises(RuntimeError, match="multinomial.*n_sample <= 0"):
        m(fiamma.tensor([1.0, 1.0]), 0)
    with pytest.raises(RuntimeError, match="multinomial.*floating"):
        m(fiamma.tensor([1, 2]), 1)
    with pytest.raises(RuntimeError, match="multinomial.*1 or 2 dim"):
        m(fiamma.ones(2, 2, 2), 1)
    with pytest.raises(RuntimeError, match="multinomial.*1 or 2 dim"):
        m(fiamma.ones(()), 1)
    with pytest.raises(RuntimeError, match="multinomial.*no categories"):
        m(fiamma.ones(2, 0), 1, True)


def test_normal_forms():
    g = fiamma.Generator().manual_seed(11)
    x = fiamma.normal(2.0, 3.0, (100000,), generator=g)
    v = npy(x)
    assert x.dtype is fiamma.float32 and abs(v.mean() - 2) < 0.05 and abs(v.std() - 3) < 0.05
    assert fiamma.normal(0, 1, (3,), dtype=fiamma.float64).dtype is fiamma.float64
    mean = fiamma.tensor([[0.0], [100.0]], dtype=fiamma.float64)
    std = fiamma.tensor([1.0, 0.0, 2.0])
    r = fiamma.normal(mean, std, generator=g.manual_seed(12))
    assert r.shape == (2, 3) and r.dtype is fiamma.float64
    z = npy(fiamma.randn(2, 3, generator=g.manual_seed(12), dtype=fiamma.float64))
    np.testing.assert_allclose(npy(r), npy(mean) + npy(std).astype(np.float64) * z,
                               rtol=1e-6)
    assert npy(r)[1, 1] == 100.0
    r = fiamma.normal(fiamma.full((5000,), 4.0), 0.5, generator=g)
    assert r.shape == (5000,) and abs(npy(r).mean() - 4) < 0.05
    r = fiamma.normal(-1.0, fiamma.full((5000,), 0.1), generator=g)
    assert abs(npy(r).mean() + 1) < 0.01 and abs(npy(r).std() - 0.1) < 0.01
    with pytest.raises(RuntimeError, match="normal.*std >= 0"):
        fiamma.normal(0.0, -1.0, (2,))
    with pytest.raises(RuntimeError, match="normal.*std >= 0"):
        fiamma.normal(0.0, fiamma.tensor([1.0, -1.0]))
    with pytest.raises(TypeError, match="normal.*size"):
        fiamma.normal(0.0, 1.0)
    with pytest.raises(TypeError, match="normal.*floating"):
        fiamma.normal(fiamma.zeros(2, dtype=fiamma.int64), 1.0)


# ---- creation-function API details ------------------------------------------------------------

def test_shapes_dtypes_and_like():
    assert fiamma.rand(2, 3).shape == (2, 3)
    assert fiamma.rand((2, 3)).shape == (2, 3)
    assert fiamma.rand([4]).shape == (4,)
    assert fiamma.rand(()).shape == ()
    assert fiamma.randn(size=(3, 1)).shape == (3, 1)
    assert fiamma.rand(0, 5).shape == (0, 5)
    assert fiamma.rand(3).dtype is fiamma.get_default_dtype()
    for dt in FLOATS:
        assert fiamma.rand(2, dtype=dt).dtype is dt
        assert fiamma.randn(2, dtype=dt).dtype is dt
    x = fiamma.zeros(2, 5, dtype=fiamma.float64)
    assert fiamma.rand_like(x).dtype is fiamma.float64 and fiamma.rand_like(x).shape == (2, 5)
    assert fiamma.randn_like(x, dtype=fiamma.float16).dtype is fiamma.float16
    assert fiamma.rand(3, requires_grad=False).requires_grad is False
    out = fiamma.empty(4)
    r = fiamma.rand(4, out=out, generator=fiamma.Generator().manual_seed(1))
    assert r is out
    np.testing.assert_array_equal(npy(out), npy(fiamma.rand(4, generator=fiamma.Generator()
                                                            .manual_seed(1))))


def test_argument_errors_name_the_op():
    with pytest.raises(TypeError, match="rand.*floating"):
        fiamma.rand(2, dtype=fiamma.int64)
    with pytest.raises(TypeError, match="randn.*floating"):
        fiamma.randn(2, dtype=fiamma.int32)
    with pytest.raises(RuntimeError, match="rand.*negative dimension"):
        fiamma.rand(-1)
    with pytest.raises(TypeError, match="rand_like"):
        fiamma.rand_like([1, 2])
    with pytest.raises(RuntimeError, match="randint.*less than"):
        fiamma.randint(5, 5, (3,))
    with pytest.raises(RuntimeError, match="randint.*out of bounds"):
        fiamma.randint(0, 300, (3,), dtype=fiamma.uint8)
    with pytest.raises(RuntimeError, match="randint.*out of bounds"):
        fiamma.randint(-1, 3, (3,), dtype=fiamma.uint8)
    with pytest.raises(TypeError, match="randint"):
        fiamma.randint(5, 3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fiamma.randint(0, 5000, (3,), dtype=fiamma.float16)
        assert any("float16" in str(x.message) for x in w)
    with pytest.raises(RuntimeError, match="randperm.*non-negative"):
        fiamma.randperm(-1)
    with pytest.raises(RuntimeError, match="randperm.*too large"):
        fiamma.randperm(300, dtype=fiamma.uint8)
    t = fiamma.zeros(3)
    with pytest.raises(RuntimeError, match=r"uniform_.*\[from, to\)"):
        t.uniform_(1, 0)
    with pytest.raises(TypeError, match="uniform_.*floating"):
        fiamma.zeros(3, dtype=fiamma.int64).uniform_()
    with pytest.raises(RuntimeError, match="uniform_"):
        fiamma.zeros(3, dtype=fiamma.float16).uniform_(-1e6, 1e6)
    with pytest.raises(RuntimeError, match="normal_.*std >= 0"):
        t.normal_(0, -1)
    with pytest.raises(TypeError, match="normal_.*floating"):
        fiamma.zeros(3, dtype=fiamma.int64).normal_()
    with pytest.raises(RuntimeError, match="exponential_.*lambda > 0"):
        t.exponential_(0)
    with pytest.raises(RuntimeError, match=r"geometric_.*\(0, 1\)"):
        t.geometric_(1)
    with pytest.raises(RuntimeError, match="log_normal_.*std > 0"):
        t.log_normal_(1, 0)
    with pytest.raises(RuntimeError, match="cauchy_.*sigma > 0"):
        t.cauchy_(0, -1)
    with pytest.raises(RuntimeError, match=r"bernoulli_.*\[0, 1\]"):
        t.bernoulli_(1.5)
    with pytest.raises(RuntimeError, match=r"bernoulli.*\[0, 1\].*p=1.5"):
        fiamma.bernoulli(fiamma.tensor([0.2, 1.5, 0.1]))
    with pytest.raises(RuntimeError, match=r"bernoulli.*\[0, 1\]"):
        fiamma.bernoulli(fiamma.tensor([0.2, math.nan]))
    with pytest.raises(TypeError, match="bernoulli.*floating"):
        fiamma.bernoulli(fiamma.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="random_.*out of bounds"):
        fiamma.zeros(3, dtype=fiamma.uint8).random_(0, 257)
    with pytest.raises(RuntimeError, match="random_.*less than"):
        fiamma.zeros(3, dtype=fiamma.int64).random_(0)
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        fiamma.rand(2, device="cuda")


def test_inplace_methods_return_self_and_bump_version():
    t = fiamma.zeros(4)
    for name, args in (("uniform_", ()), ("normal_", ()), ("random_", (0, 5)),
                       ("bernoulli_", (0.5,)), ("exponential_", ()), ("geometric_", (0.5,)),
                       ("log_normal_", ()), ("cauchy_", ())):
        v = t._version
        assert getattr(t, name)(*args) is t
        assert t._version == v + 1
    assert fiamma.zeros(0).uniform_().shape == (0,)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 5), min_size=0, max_size=3), seed=st.integers(0, 2**64 - 1),
       dt=st.sampled_from(FLOATS))
def test_strided_inplace_equals_contiguous_draw(shape, seed, dt):
    g = fiamma.Generator()
    # every other element along each dim of a bigger tensor
    big = [2 * s for s in shape]
    base = fiamma.zeros(big, dtype=dt)
    view = base.as_strided(shape, [2 * st_ for st_ in base.stride()]) if shape else base
    view.normal_(generator=g.manual_seed(seed))
    ref = fiamma.randn(*shape, generator=g.manual_seed(seed), dtype=dt)
    np.testing.assert_array_equal(npy(view), npy(ref))


def test_bernoulli_result_requires_grad_with_zero_gradient():
    # as PyTorch: draws from probabilities that require grad require grad too, and the
    # gradient w.r.t. the probabilities is zero (the draws are piecewise constant in them)
    pytest.importorskip("fiamma.autograd")
    p = fiamma.tensor([0.2, 0.7, 1.0], requires_grad=True)
    for draw in (lambda: fiamma.bernoulli(p), lambda: p.bernoulli(), lambda: p.bernoulli(0.3),
                 lambda: fiamma.bernoulli(p, 0.5)):
        r = draw()
        assert r.requires_grad and r.grad_fn is not None
        p.grad = None
        (r * fiamma.tensor([1.0, 2.0, 3.0])).sum().backward()
        assert p.grad.tolist() == [0.0, 0.0, 0.0]
    assert not fiamma.bernoulli(p.detach()).requires_grad
    # in place, with probabilities that require grad (self does not): zeros for p
    q = fiamma.tensor([[0.5], [0.25]], dtype=fiamma.float64, requires_grad=True)
    r = fiamma.zeros(2, 3).bernoulli_(q)
    assert r.requires_grad
    r.sum().backward()
    assert q.grad.dtype is fiamma.float64 and q.grad.tolist() == [[0.0], [0.0]]
    assert not fiamma.zeros(2).bernoulli_(0.5).requires_grad
