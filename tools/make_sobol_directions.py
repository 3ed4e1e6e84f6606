"""Write packages/core/src/fiamma/_sobol_directions.npz, the Sobol direction numbers that
fiamma.quasirandom.SobolEngine uses, from the published Joe & Kuo table new-joe-kuo-6.21201
(as SciPy ships it: scipy/stats/_sobol_direction_numbers.npz, arrays `poly` and `vinit`).

Layout (bit-packed; about 390 KB):
  degree  uint8[21201]   degree s of each dimension's primitive polynomial (0 for dimension 0)
  a       uint32[21200]  the polynomial's s - 1 interior coefficients (dimensions 1...), as bits
  m       uint8[...]     np.packbits of the initial direction numbers m_1..m_s of dimensions
                         1..., each m_k (odd, < 2**k) stored as its k - 1 bits above the lowest,
                         most significant first

Run: python tools/make_sobol_directions.py  (needs SciPy)
"""

import os
import sys

import numpy as np


def main(out):
    import scipy

    z = np.load(os.path.join(os.path.dirname(scipy.__file__), "stats",
                             "_sobol_direction_numbers.npz"))
    vinit, poly = z["vinit"], z["poly"]
    degree = np.array([int(p).bit_length() - 1 for p in poly])
    m = np.concatenate([vinit[d, :degree[d]] for d in range(1, len(poly))])
    k = np.concatenate([np.arange(1, degree[d] + 1) for d in range(1, len(poly))])
    assert (m % 2 == 1).all() and (m < (1 << k)).all() and (poly[1:] % 2 == 1).all()
    width = k - 1
    start = np.concatenate([[0], np.cumsum(width)[:-1]])
    bits = np.zeros(int(width.sum()), np.uint8)
    for b in range(int(width.max())):
        sel = width > b
        bits[start[sel] + b] = ((m[sel] >> 1) >> (width[sel] - 1 - b)) & 1
    a = (poly[1:] >> 1) & ~(1 << (degree[1:] - 1))
    np.savez_compressed(out, degree=degree.astype(np.uint8), a=a.astype(np.uint32),
                        m=np.packbits(bits))


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "packages", "core", "src", "fiamma", "_sobol_directions.npz"))
