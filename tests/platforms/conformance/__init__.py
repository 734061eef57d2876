"""Conformance checks: what the bridge sends, judged by the platforms' own specifications."""
