"""Compile every chapter's C++ kernel: ``lib/repro/<slug>/_kernels*.cpp`` becomes ``repro.<slug>._kernels*``.

A chapter adds a kernel by adding the file; nothing here lists them.
Kernels compile once, in place, by ``make setup`` (``setup.py build_ext --inplace``, on every core). The editable
install before it sets ``REPRO_NO_KERNELS=1``: without it, pip compiled every kernel too, one at a time, and
``build_ext --inplace`` then compiled them all again.
"""
import os
from pathlib import Path

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

ROOT = Path(__file__).parent
ext_modules = [] if os.environ.get("REPRO_NO_KERNELS") else [
    Pybind11Extension(
        f"repro.{cpp.parent.name}.{cpp.stem}",
        [str(cpp.relative_to(ROOT))],
        cxx_std=17,
        extra_compile_args=["-O3"],
    )
    for cpp in sorted((ROOT / "lib" / "repro").glob("*/_kernels*.cpp"))
]

setup(ext_modules=ext_modules, cmdclass={"build_ext": build_ext}, package_dir={"": "lib"},
      options={"build_ext": {"parallel": os.cpu_count() or 1}})
