RETRIES = 3


def run(job):
    result = job(retries=RETRIES)
    log(result)
    return result
