"""Compile every chapter's C++ kernel: ``lib/repro/<slug>/_kernels*.cpp`` becomes ``repro.<slug>._kernels*``.

A chapter adds a kernel by adding the file; nothing here lists them.
"""
from pathlib import Path

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

ROOT = Path(__file__).parent
ext_modules = [
    Pybind11Extension(
        f"repro.{cpp.parent.name}.{cpp.stem}",
        [str(cpp.relative_to(ROOT))],
        cxx_std=17,
        extra_compile_args=["-O3"],
    )
    for cpp in sorted((ROOT / "lib" / "repro").glob("*/_kernels*.cpp"))
]

setup(ext_modules=ext_modules, cmdclass={"build_ext": build_ext}, package_dir={"": "lib"})
