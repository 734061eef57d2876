"""The test suite, as packages that mirror the code's (``tests.bridge``, ``tests.bridge.store``,
``tests.platforms.slack``, ...) with what the tests share in ``tests.support``.

Every directory under ``tests/`` is a package (an ``__init__.py`` each) so that pytest imports
``tests/bridge/test_x.py`` as ``tests.bridge.test_x`` with only the repository root put on
``sys.path``: a bare directory named ``bridge`` or ``platforms`` on ``sys.path`` would shadow the
real package.
"""
