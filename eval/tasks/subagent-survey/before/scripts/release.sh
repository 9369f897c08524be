#!/bin/sh
# Tag and push a release.
set -e
# TODO: bump the version in setup.cfg automatically
git tag "v$1"
git push origin "v$1"
