#!/usr/bin/env bash
# usage: bump.sh major|minor|patch VERSION
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: bump.sh major|minor|patch VERSION" >&2
    exit 2
fi

part=$1
version=${2#v}

if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "bump.sh: not a version: $2" >&2
    exit 2
fi

IFS=. read -r major minor patch <<<"$version"

case $part in
    major)
        major=$((major + 1))
        minor=0
        patch=0
        ;;
    minor)
        minor=$((minor + 1))
        ;;
    patch)
        patch=$((patch + 1))
        ;;
    *)
        echo "bump.sh: unknown part: $part" >&2
        exit 2
        ;;
esac

echo "$major.$minor.$patch"
