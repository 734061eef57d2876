"""The fake Slack, its rules and the harnesses the Slack tests and benchmarks drive."""
