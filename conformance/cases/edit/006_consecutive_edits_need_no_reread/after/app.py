import sys


def greet(name: str) -> str:
    message = "Hello, " + name
    print(message)
    return message


def main() -> None:
    greet(sys.argv[1] if len(sys.argv) > 1 else "world")


if __name__ == "__main__":
    main()
