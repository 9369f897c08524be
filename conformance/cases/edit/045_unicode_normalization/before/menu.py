greeting = "café au lait"
