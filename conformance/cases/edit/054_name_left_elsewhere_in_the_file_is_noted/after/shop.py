def compute_total(items):
    return sum(i.price for i in items)


def report(items):
    print("total", compute_total(items))


DEBUG = False
VERBOSE = True
