# The C extension is built by cffi (API mode); everything else is in pyproject.toml.
#
# setuptools compiles an extension's sources one after another; fiamma's dozen C files take
# minutes that way, so build_ext here compiles them on every core at once (the same compiler
# calls, only concurrent), then links as usual.
import os
from concurrent.futures import ThreadPoolExecutor

from setuptools import setup
from setuptools.command.build_ext import build_ext


class ParallelBuildExt(build_ext):
    def build_extensions(self):
        cc = self.compiler
        workers = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                             else (os.cpu_count() or 1), 8))

        def compile_all(sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                        extra_preargs=None, extra_postargs=None, depends=None):
            macros, objects, extra_postargs, pp_opts, build = cc._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs)
            cc_args = cc._get_cc_args(pp_opts, debug, extra_preargs)

            def one(obj):
                src, ext = build[obj]
                cc._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

            # largest sources first, so the long compiles start at once
            order = sorted(objects, key=lambda o: -os.path.getsize(build[o][0]))
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, order))
            return objects

        if hasattr(cc, "_setup_compile") and hasattr(cc, "_compile") and workers > 1:
            cc.compile = compile_all
        super().build_extensions()


setup(cffi_modules=["csrc/build_ffi.py:ffibuilder"], cmdclass={"build_ext": ParallelBuildExt})
