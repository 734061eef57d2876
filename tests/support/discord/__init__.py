"""The fake Discord, its rules and the harnesses the Discord tests and benchmarks drive."""
