# The C extension is built by cffi (API mode); everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["csrc/build_ffi.py:ffibuilder"])
