test
