"""Chat platforms for ask-bridge."""
