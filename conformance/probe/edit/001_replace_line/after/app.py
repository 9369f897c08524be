import os

DEBUG = False
LOG_LEVEL = "info"


def main():
    print("starting")
