#!/bin/sh
# Copy the app to HOST and restart the service there: ./deploy.sh 10.0.0.5
set -eu
host=${1:?usage: deploy.sh HOST}
rsync -az --delete app requirements.txt "deploy@$host:/srv/status-page/"
ssh "deploy@$host" 'sudo systemctl restart status-page && systemctl is-active status-page'
