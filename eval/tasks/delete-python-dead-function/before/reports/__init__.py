from .export import export

__all__ = ["export"]
