"""invoicer: order exports in, invoices out."""

__version__ = "0.4.2"
