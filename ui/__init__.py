"""PySide6 widgets and Qt item models. Uses `app` for everything that is not drawing."""
