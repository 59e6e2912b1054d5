"""The apistore fixtures (`server`, `bus`, `api`) live in tests/conftest.py for every package."""
