"""The benchmarks, a package so that each imports the tests' shared support (``tests.support``)
and its neighbours (``bench.engine_common``) by name, with nothing put on ``sys.path``: run each
from the repository root as a module, ``.venv/bin/python -m bench.NAME``.

``cycle_child.py`` and ``expiry_child.py`` are the exception: run by path, they measure whichever
``bridge`` is first on ``sys.path`` (this checkout's or an earlier revision's).
"""
