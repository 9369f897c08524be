"""Print a slug and a word count for each post title in titles.txt."""
from text_utils import slugify, word_count


def main():
    with open("titles.txt", encoding="utf-8") as f:
        titles = [line.strip() for line in f if line.strip()]
    for title in titles:
        print(f"{slugify(title)}\t{word_count(title)}")


if __name__ == "__main__":
    main()
