"""Input checks for the signup form."""
import re

# local part @ domain labels . top-level domain
EMAIL_RE = re.compile(r"^[A-Za-z0-9._]+@[A-Za-z0-9-]+\.[A-Za-z]{2,}$")

# +country code optional, then 9 to 12 digits; spaces and dashes allowed between groups
PHONE_RE = re.compile(r"^\+?\d{1,3}?[ -]?\d{2,4}([ -]?\d{2,4}){2,3}$")


def is_valid_email(address):
    return bool(EMAIL_RE.match(address.strip()))


def is_valid_phone(number):
    return bool(PHONE_RE.match(number.strip()))
