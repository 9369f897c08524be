root
