# release bot was here
VERSION = "2.1.0"
CODENAME = "otter"
