#!/usr/bin/env bash
set -e
sed -i 's/for i in range(n - 1)\]/for i in range(n)]/' pagination.py
python3 test_pagination.py
