from .store import Catalog

__all__ = ["Catalog"]
