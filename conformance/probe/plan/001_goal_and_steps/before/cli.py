import argparse

p = argparse.ArgumentParser()
p.add_argument("--quiet", action="store_true")
args = p.parse_args()
