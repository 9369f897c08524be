sed -i 's/\bword_count\b/count_words/g' main.py
