"""Network settings."""


def default_host():
    return "0.0.0.0"


def default_port():
    return 8443
