#!/usr/bin/env bash
# Tests for scripts/bump.sh. Run: bash test.sh
fail=0

expect() {
    local want=$1
    shift
    local got
    got=$(bash scripts/bump.sh "$@" 2>/dev/null)
    if [ "$got" = "$want" ]; then
        echo "ok   bump.sh $*"
    else
        echo "FAIL bump.sh $*: want '$want', got '$got'"
        fail=1
    fi
}

expect_error() {
    if bash scripts/bump.sh "$@" >/dev/null 2>&1; then
        echo "FAIL bump.sh $*: should have failed"
        fail=1
    else
        echo "ok   bump.sh $* fails"
    fi
}

expect 1.4.3 patch 1.4.2
expect 1.5.0 minor 1.4.2
expect 2.0.0 major 1.4.2
expect 0.10.0 minor v0.9.7
expect_error minor 1.4
expect_error huge 1.4.2

exit $fail
