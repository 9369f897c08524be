echo "check 1"
echo "check 2"
echo "check 3"
echo "checks passed: 3"
