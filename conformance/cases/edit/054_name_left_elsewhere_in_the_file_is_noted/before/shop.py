def calc_total(items):
    return sum(i.price for i in items)


def report(items):
    print("total", calc_total(items))


DEBUG = True
VERBOSE = True
