"""CPU primitives of the random family: fills from the counter-based Philox4x32-10 generator
(contract.Backend documents each). A draw is a pure function of (seed, offset, position): the
op layer reserves the blocks a call consumes from its fiamma.Generator, so results do not
depend on the device or thread count. Outputs are contiguous."""

from fiamma._lib import ffi, lib

__all__ = ["rand_fill", "rand_int", "rand_bernoulli_p", "randperm", "multinomial"]


def rand_fill(dist, out, seed, offset, a, b):
    return lib.fm_rand_fill(dist, out._dtype.code, out._numel, out._ptr, seed, offset, a, b)


def rand_int(out, seed, offset, low, rng):
    return lib.fm_rand_int(out._dtype.code, out._numel, out._ptr, seed, offset, low, rng)


def rand_bernoulli_p(out, p, seed, offset, bad):
    buf = ffi.new("int64_t *")
    rc = lib.fm_rand_bernoulli_p(out._dtype.code, out._numel, out._ptr, p._ptr, seed, offset,
                                 buf)
    if rc and bad is not None:
        bad[:] = [buf[0]]
    return rc


def randperm(out, seed, offset):
    return lib.fm_randperm(out._numel, out._ptr, seed, offset)


def multinomial(probs, nsamp, replacement, out, seed, offset, info):
    buf = ffi.new("int64_t[2]")
    rows, ncat = probs._shape
    rc = lib.fm_multinomial(rows, ncat, probs._ptr, nsamp, replacement, out._ptr, seed, offset,
                            buf)
    if rc and info is not None:
        info[:] = [buf[0], buf[1]]
    return rc
