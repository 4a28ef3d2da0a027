"""Test doubles: stand-ins for what the tests cannot reach (the Hub, paid APIs)."""
