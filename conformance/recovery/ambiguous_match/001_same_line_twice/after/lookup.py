def find_user(users, name):
    for u in users:
        if u.name == name:
            return u
    raise KeyError(name)


def find_group(groups, name):
    for g in groups:
        if g.name == name:
            return g
    return None
