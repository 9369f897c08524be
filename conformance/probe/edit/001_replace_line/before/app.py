import os

DEBUG = True
LOG_LEVEL = "info"


def main():
    print("starting")
