import sys
print(os.name)
