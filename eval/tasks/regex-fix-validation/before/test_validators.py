import unittest

from validators import is_valid_email, is_valid_phone


class EmailTest(unittest.TestCase):
    def test_valid(self):
        for address in [
            "alice@example.com",
            "bob.smith@example.org",
            "carol_92@example.io",
            "dave+newsletter@example.com",
            "erin@mail.example.co.uk",
            "frank-ops@example-corp.com",
        ]:
            with self.subTest(address=address):
                self.assertTrue(is_valid_email(address))

    def test_invalid(self):
        for address in [
            "plainaddress",
            "@example.com",
            "alice@",
            "alice@example",
            "alice@@example.com",
            "alice smith@example.com",
            "alice@exa mple.com",
            "alice@.com",
        ]:
            with self.subTest(address=address):
                self.assertFalse(is_valid_email(address))


class PhoneTest(unittest.TestCase):
    def test_valid(self):
        for number in ["+44 20 7946 0958", "020-7946-0958", "+1 415 555 0132"]:
            with self.subTest(number=number):
                self.assertTrue(is_valid_phone(number))

    def test_invalid(self):
        for number in ["12", "phone", "+44 20 79x6 0958"]:
            with self.subTest(number=number):
                self.assertFalse(is_valid_phone(number))


if __name__ == "__main__":
    unittest.main()
