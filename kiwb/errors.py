"""User-facing errors: one clear line naming what is wrong and how to fix it."""


class KiwbError(Exception):
    """An error caused by the user's input or environment, shown without a traceback."""


class ConfigError(KiwbError):
    """The project configuration (kiwb.toml) is invalid."""


class DataError(KiwbError):
    """A data file cannot be read or lacks what is needed."""


class TeacherError(KiwbError):
    """A teacher checkpoint cannot be used."""


class StoreDamaged(KiwbError):
    """The project's store cannot be read as a store, or is empty beside the project's work."""
