import sys


def greet(name):
    message = "Hello, " + name
    print(message)
    return message


def main():
    greet(sys.argv[1] if len(sys.argv) > 1 else "world")


if __name__ == "__main__":
    main()
