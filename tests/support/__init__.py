"""What the tests share -- servers, fakes of the platforms and their rules, sample question sets,
helper processes -- imported by name (``tests.support.redis_server``), by the tests and by the
benchmarks (``bench/``) alike.
"""
