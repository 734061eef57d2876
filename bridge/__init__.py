"""ask-bridge core."""
