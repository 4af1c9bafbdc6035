"""The project folder: kiwb.toml settings, paths, the store and event records."""
