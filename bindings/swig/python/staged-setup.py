# setup.py of the gpucoll package staged from a CMake build tree, beside its pyproject.toml: the
# package holds a compiled module and libgpucoll, so its wheel is tagged for this interpreter and
# platform (cp311-cp311-linux_x86_64, ...), not as pure Python that would install anywhere.
from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=BinaryDistribution)
