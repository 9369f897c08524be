import unittest

from pagination import page, page_count, paginate


class PageCountTest(unittest.TestCase):
    def test_exact_and_partial(self):
        self.assertEqual(page_count(9, 3), 3)
        self.assertEqual(page_count(10, 3), 4)
        self.assertEqual(page_count(0, 3), 0)

    def test_rejects_zero(self):
        with self.assertRaises(ValueError):
            page_count(5, 0)


class PaginateTest(unittest.TestCase):
    def test_last_page_is_kept(self):
        self.assertEqual(paginate([1, 2, 3, 4, 5, 6, 7], 3), [[1, 2, 3], [4, 5, 6], [7]])

    def test_exact_fit(self):
        self.assertEqual(paginate(list("abcd"), 2), [["a", "b"], ["c", "d"]])

    def test_empty(self):
        self.assertEqual(paginate([], 5), [])

    def test_page_lookup(self):
        items = list(range(1, 12))
        self.assertEqual(page(items, 3, 5), [11])
        self.assertEqual(page(items, 4, 5), [])


if __name__ == "__main__":
    unittest.main()
